# JupyterLab settings for `make lab`. The workshop machines (and many containers) run as root,
# which jupyter_server refuses unless told otherwise.
c = get_config()  # noqa: F821 (injected by Jupyter)
c.ServerApp.allow_root = True
c.ServerApp.root_dir = "."
c.ServerApp.ip = "127.0.0.1"
c.ServerApp.open_browser = True  # where there is no browser (a server, a container) it only logs
