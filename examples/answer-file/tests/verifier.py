from nemo_gym.verifiers import exact_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    return exact_match(read_text(workspace, "answer.txt"), task_data["answer"], ignore_case=True)
