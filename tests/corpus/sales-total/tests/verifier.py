from nemo_gym.verifiers import numeric_match
from nemo_gym.verifiers.files import read_text


def verify(workspace, task_data):
    answer = read_text(workspace, "total.txt")
    return float(answer is not None and numeric_match(answer, task_data["total"], abs_tol=0.005))
