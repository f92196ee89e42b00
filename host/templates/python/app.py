"""{{name}}: a taskhost task handler. `sh build.sh` builds plugins/{{name}}.wasm."""
import taskhost


def handle(task):
    name = task.data.get("name") if isinstance(task.data, dict) else None
    if not name:
        raise taskhost.Fail("invalid-input", 'no "name" in the data')
    taskhost.progress(50)
    taskhost.log.info(f"attempt {task.attempt} of task {task.id}")
    print("printed lines land in the run's logs too")
    return {"hello": name}
