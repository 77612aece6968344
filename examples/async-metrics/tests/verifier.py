from nemo_gym.verifiers.files import read_text


def _primes_below(limit):
    return [n for n in range(2, limit) if all(n % d for d in range(2, int(n**0.5) + 1))]


async def _answer_lines(workspace):
    # Any awaitable works here: a judge client's coroutine, asyncio.sleep, a subprocess (each gets an
    # event loop, as under asyncio.run). This one never waits on the loop, so none is started.
    text = read_text(workspace, "primes.txt")
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


async def verify(workspace, task_data):
    lines = await _answer_lines(workspace)
    expected = [str(n) for n in _primes_below(task_data["limit"])]
    correct = sum(1 for line in lines if line in expected)
    return {
        "reward": float(lines == expected),
        "correct": correct,
        "extra": len(lines) - correct,
        "recall": correct / len(expected),
    }
