# On Colab: install attn_lib at the commit this book was built from, keeping Colab's own packages (torch,
# transformers, ipywidgets, ...). Elsewhere this does nothing (`make book` has installed it).
# This cell is written from book/_shared/colab_setup.py by `python tools/chapters.py sync`; edit it there.
import sys

if "google.colab" in sys.modules:
    import subprocess
    from importlib.metadata import version

    REPO = "{repository_url}"
    REF = "{repository_ref}"  # the commit (or tag) the book was built from
    if not REPO:
        raise RuntimeError(
            "This copy of the book is not published, so it names no repository to install attn_lib from: "
            "open the chapter from the published book, or pip install a wheel of attn_lib here."
        )
    keep = f"ipywidgets=={version('ipywidgets')}"  # Colab's widget manager expects its own ipywidgets
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"attn_lib @ git+{REPO}@{REF}", keep], check=True)
    if int(version("ipywidgets").split(".")[0]) >= 8:
        from google.colab import output

        output.enable_custom_widget_manager()
