# On Colab: install attn_lib (at the commit the assignment was built from) and Otter's student side, changing none
# of Colab's packages, and write this notebook's public tests to ./tests (Colab keeps the notebook itself off the
# disk, where Otter would read them). Elsewhere this does nothing.
# This cell is written from assignments/_colab_setup.py by `make assignments`; edit it there.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess
    from importlib.metadata import version

    from google.colab import _message

    REPO = "{repository_url}"
    REF = "{repository_ref}"  # the commit (or tag) the assignment was built from
    if not REPO:
        raise RuntimeError(
            "This assignment was built from a book that names no repository to install attn_lib from: the "
            "instructor sets one (python tools/chapters.py set-repository URL REF) and rebuilds it (make assignments)."
        )
    # otter-grader and fica without their dependencies: otter-grader 7 requires ipywidgets>=8.1.5 (Colab has 7.7.1)
    # and fica Sphinx, neither of which otter.Notebook(...).check uses; what it does import is installed beside them,
    # at versions Colab's packages satisfy (tools/colab_env.py checks that no pinned Colab version changes).
    OTTER = ["otter-grader==7.0.0", "fica==0.4.1"]
    NEEDS = ["python-frontmatter==1.3.0", "ipylab==1.1.0", "dill>=0.3,<1", "wrapt>=1.16,<2"]
    keep = f"ipywidgets=={version('ipywidgets')}"  # Colab's widget manager expects its own ipywidgets
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"attn_lib @ git+{REPO}@{REF}", *NEEDS, keep], check=True)
    subprocess.run([*pip, "--no-deps", *OTTER], check=True)
    if int(version("ipywidgets").split(".")[0]) >= 8:
        from google.colab import output

        output.enable_custom_widget_manager()
    notebook = _message.blocking_request("get_ipynb", timeout_sec=60)["ipynb"]
    os.makedirs("tests", exist_ok=True)
    for name, test in notebook["metadata"]["otter"]["tests"].items():
        with open(os.path.join("tests", f"{name}.py"), "w") as f:
            f.write(f"OK_FORMAT = True\n\ntest = {test!r}\n")
