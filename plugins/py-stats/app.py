"""A task handler in Python: statistics of {"numbers": [...]}.

Built with componentize-py against wit/task-handler.wit (see plugins/build.sh). Reports progress
every tenth of the input, partial results half way, logs a summary, and fails with a
non-retryable `invalid-input` error on bad data. {"crash": "why"} raises an uncaught exception, as a
handler with a bug would: the host stops the run and shows the end of the traceback.
"""
import json
import math

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
            raise invalid(f"data is not JSON: {e}")
        if isinstance(data, dict) and "crash" in data:
            print("about to crash")
            raise RuntimeError(f"crash requested: {data['crash']}")
        numbers = data.get("numbers") if isinstance(data, dict) else None
        if not isinstance(numbers, list) or not numbers:
            raise invalid('expected {"numbers": [1, 2, ...]} with at least one number')
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
            raise invalid("every element of numbers must be a number")

        count, total, squares = 0, 0.0, 0.0
        step = max(1, len(numbers) // 10)
        for i, n in enumerate(numbers, start=1):
            count += 1
            total += n
            squares += n * n
            if i % step == 0:
                host.set_progress(min(99, i * 100 // len(numbers)))
            if i == len(numbers) // 2:
                host.set_results(json.dumps({"partial_count": count, "partial_sum": total}))
        mean = total / count
        variance = max(0.0, squares / count - mean * mean)
        result = {
            "count": count,
            "sum": total,
            "mean": mean,
            "min": min(numbers),
            "max": max(numbers),
            "stdev": math.sqrt(variance),
        }
        host.log(LogLevel.INFO, f"task {task.task_id} attempt {task.attempt}: {count} numbers")
        host.set_progress(100)
        return json.dumps(result)
