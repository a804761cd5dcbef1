# On Colab: install attn_lib from the repository. Elsewhere this does nothing (`make book` has installed it).
# This cell is written from book/_shared/colab_setup.py by `python tools/chapters.py sync`; edit it there.
import sys

if "google.colab" in sys.modules:
    import subprocess

    REPO = "{repository_url}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"attn_lib @ git+{REPO}"], check=True)
