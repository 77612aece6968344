import asyncio

from nemo_gym.verifiers.files import read_text


def _primes_below(limit):
    return [n for n in range(2, limit) if all(n % d for d in range(2, int(n**0.5) + 1))]


async def verify(workspace, task_data):
    loop = asyncio.get_running_loop()  # read off the event loop (asyncio.to_thread needs 3.9)
    text = await loop.run_in_executor(None, read_text, workspace, "primes.txt")
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    expected = [str(n) for n in _primes_below(task_data["limit"])]
    correct = sum(1 for line in lines if line in expected)
    return {
        "reward": float(lines == expected),
        "correct": correct,
        "extra": len(lines) - correct,
        "recall": correct / len(expected),
    }
