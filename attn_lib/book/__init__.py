"""What only the book and the course use, apart from the library's core (which never imports this package).

* :mod:`attn_lib.book.chapter` -- the chapters' settings cell: run settings, model and text loading, showing a figure;
* :mod:`attn_lib.book.symbolic` -- the SymPy derivations of the paper's results, for step-by-step display;
* :mod:`attn_lib.book.toy` -- synthetic instances, toy models and per-row statistics of the chapters' checks;
* :mod:`attn_lib.book.widgets` -- sliders that work with and without a kernel;
* :mod:`attn_lib.book.display_math` -- display equations broken to fit the book's column;
* :mod:`attn_lib.book.exercises` -- the checks behind the assignments' tests, and the instructor guide's indexes.

Each is imported on its own (``from attn_lib.book import chapter``); importing this package loads none of them.
The figure layout and provenance labels that the core's figures share with the book are core modules
(:mod:`attn_lib.layout`, :mod:`attn_lib.provenance`); ``tests/test_layers.py`` keeps the core free of this package.
"""
