"""`rmx serve` for the bench scripts that talk to it over HTTP (logits_check.py,
new_lengths.py): a private home, a free port, the model's folder under the model roots (the
requests name the model by its folder, which TCP clients may there), its log kept in the home."""
import contextlib, json, os, socket, subprocess, tempfile, time, urllib.request


def post(url, body, timeout=600):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=timeout))


@contextlib.contextmanager
def serving(rmx, model, launch=()):
    """Yields (base URL, home) once the server answers (the log is home/serve.log); `launch`
    goes before `serve` (`launch ARGS -- rmx` runs it over ranks). Stops it after."""
    home = tempfile.mkdtemp()
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    env = dict(os.environ, RMX_HOME=home, XDG_RUNTIME_DIR=home,
               RMX_MODEL_ROOTS=os.path.dirname(os.path.abspath(model)))
    srv = subprocess.Popen([rmx, *launch, "serve", "--port", str(port)], env=env,
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(home, "serve.log"), "w"))
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/api/version", timeout=1); break
            except Exception:
                time.sleep(0.2)
        yield base, home
    finally:
        srv.terminate(); srv.wait(timeout=30)
