# Keep pytest away from build outputs and the environment (the book build writes executed
# copies of every notebook under book/_build).
collect_ignore_glob = [".venv/*", "book/_build/*", "build/*", "node_modules/*"]
