import json

from nemo_gym.verifiers import exact_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    text = read_text(workspace, "config.json")
    if text is None:
        return 0.0
    try:
        config = json.loads(text)
    except ValueError:
        return 0.0
    if not isinstance(config, dict):
        return 0.0
    checks = [
        exact_match(str(config.get("service")), task_data["service"]),
        type(config.get("port")) is int and config["port"] == task_data["port"],
        exact_match(str(config.get("log_level")), task_data["log_level"], ignore_case=True),
        config.get("features") == task_data["features"],
    ]
    return float(all(checks))
