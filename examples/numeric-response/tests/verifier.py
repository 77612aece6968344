from nemo_gym.verifiers import extract_answer, final_text, numeric_match


def verify(response, task_data):
    return numeric_match(extract_answer(final_text(response)), task_data["answer"])
