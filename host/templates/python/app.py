"""{{name}}: a taskhost task handler. `sh build.sh` builds plugins/{{name}}.wasm."""
import json

import wit_world
from componentize_py_types import Err
from wit_world.imports import host
from wit_world.imports.types import HandlerError, LogLevel


def invalid(message):
    return Err(HandlerError(code="invalid-input", message=message, retryable=False))


class WitWorld(wit_world.WitWorld):
    def handle(self, task):
        try:
            data = json.loads(task.data)
        except ValueError as e:
            raise invalid(str(e))
        if not isinstance(data, dict) or "name" not in data:
            raise invalid('no "name" in the data')
        host.set_progress(50)
        host.log(LogLevel.INFO, f"attempt {task.attempt} of task {task.task_id}")
        print("printed lines land in the run's logs too")
        return json.dumps({"hello": data["name"]})
