from nemo_gym.verifiers import exact_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    return exact_match(read_text(workspace, "answer.md"), task_data["expected"])
