import asyncio
import json

from nemo_gym.verifiers.files import read_text


def _fibonacci(count):
    numbers = [0, 1]
    while len(numbers) < count:
        numbers.append(numbers[-1] + numbers[-2])
    return numbers[:count]


async def verify(workspace, task_data):
    loop = asyncio.get_running_loop()
    text = await loop.run_in_executor(None, read_text, workspace, "fib.json")
    try:
        numbers = json.loads(text) if text is not None else None
    except ValueError:
        numbers = None
    if not isinstance(numbers, list):
        numbers = []
    expected = _fibonacci(task_data["count"])
    correct = sum(1 for got, want in zip(numbers, expected) if type(got) is int and got == want)
    return {
        "reward": float(correct == len(expected) == len(numbers)),
        "correct_terms": correct,
        "length": len(numbers),
    }
