# On Colab: install attn_lib and otter-grader, and write this notebook's public tests to ./tests (Colab keeps the
# notebook itself off the disk, where Otter would read them). Elsewhere this does nothing.
# This cell is written from assignments/_colab_setup.py by `make assignments`; edit it there.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess
    from importlib.metadata import version

    from google.colab import _message

    REPO = "{repository_url}"
    if not REPO:
        raise RuntimeError(
            "This assignment was built from a book that names no repository to install attn_lib from: the "
            "instructor sets one (python tools/chapters.py set-repository URL) and rebuilds it (make assignments)."
        )
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"attn_lib @ git+{REPO}", "otter-grader"], check=True)
    if int(version("ipywidgets").split(".")[0]) >= 8:  # otter-grader needs ipywidgets 8
        from google.colab import output

        output.enable_custom_widget_manager()
    notebook = _message.blocking_request("get_ipynb", timeout_sec=60)["ipynb"]
    os.makedirs("tests", exist_ok=True)
    for name, test in notebook["metadata"]["otter"]["tests"].items():
        with open(os.path.join("tests", f"{name}.py"), "w") as f:
            f.write(f"OK_FORMAT = True\n\ntest = {test!r}\n")
