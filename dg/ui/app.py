"""The dg demo: watch DiffusionGemma denoise its canvas, race it against AR decoding, learn how it works.

`build_app` composes the three tabs (dg.ui.generate_tab, race_tab, learn_tab), each of which builds
its own components and wires them to dg; `serve` starts it on a free local port (tests, benchmarks).
`main` honours Gradio's GRADIO_SERVER_PORT / GRADIO_SERVER_NAME (--port / --host override them);
without either it takes 7860 or the next free port, and prints the URL. The app takes a model runner
(dg.engine.runner): `main` runs the model in one worker process that serves every run
(dg.engine.worker: the sampler never waits on the server's GIL); `--in-process` keeps it in a thread of
the server's process, as `serve` does by default; `--replicas N` (or MIN-MAX, autoscaled) serves runs from
Ray Serve replicas of the model (dg.engine.replicas), on a local Ray or the cluster at `--ray-address` /
RAY_ADDRESS; without it nothing imports Ray.

    python app.py [--model DIR_OR_ID] [--ar-model DIR_OR_ID] [--port N] [--host ADDR] [--share] [--in-process]
    python app.py --replicas 2-8 [--ray-address ADDR]
"""

import argparse
import socket
import sys
from contextlib import contextmanager

import gradio as gr
import torch

from dg.ui import files
from dg.ui import generate_tab, learn_tab, race_tab
from dg.ui.common import RunState, guard_inputs
from dg.ui.kept import MAX_SESSIONS
from dg.engine.turns import TURNS
from dg.engine.runner import InProcess
from dg.engine.worker import start_worker
from dg.paths import PATHS
from dg.devices import share_cpu
from dg.loading import load_ar_model

MAX_UPLOAD = "20mb"
LAUNCH = dict(max_file_size=MAX_UPLOAD, state_session_capacity=MAX_SESSIONS)  # past it Gradio drops the oldest
# The presenter view (theme.CSS, body.dg-presenter): the inputs one bar on top, the canvas full width with large
# cells under it, the status line large; the examples fold (open again when the view is left).
PRESENTER_JS = """(on) => {
  document.body.classList.toggle('dg-presenter', on);
  const examples = document.querySelector('#dg-examples > .label-wrap');
  if (examples && examples.classList.contains('open') === on) examples.click();
}"""


# Gradio's slider sets a typed number outside its range to the nearest end without a word: this says so under
# the slider, in one line naming the value and the range, and shows the end it took in the box (the value a run
# then reads); the line goes when the box is typed in again or the slider moves.
RANGE_JS = """() => {
  if (window.__dgRange) return;
  window.__dgRange = true;
  const check = (box) => {
    const block = box.closest('.block');
    const range = block && block.querySelector('input[type=range]');
    if (!range || box.value === '') return;
    const lo = Number(range.min), hi = Number(range.max), typed = Number(box.value);
    if (typed >= lo && typed <= hi) return;
    let note = block.querySelector('.dg-range-note');
    if (!note) {
      note = document.createElement('div');
      note.className = 'dg-range-note dg-warn';
      block.appendChild(note);
    }
    const label = block.querySelector('[data-testid="block-info"]');
    const name = label ? label.innerText.trim() : 'this setting';
    const end = typed > hi ? hi : lo;
    note.textContent = `${name}: ${box.value} is outside ${lo}–${hi}; it is set to ${end}`;
    box.value = end;
  };
  const typed = (e) => e.target.matches && e.target.matches('input[type=number]');
  document.addEventListener('change', (e) => { if (typed(e)) check(e.target); }, true);
  document.addEventListener('keydown', (e) => { if (e.key === 'Enter' && typed(e)) check(e.target); }, true);
  document.addEventListener('input', (e) => {  // the box typed in again, or the slider moved: the line goes
    const block = e.target.closest && e.target.closest('.block');
    const note = block && block.querySelector('.dg-range-note');
    if (note) note.remove();
  }, true);
}"""


def header(runner) -> str:
    """The model's title line with the checkpoint by its name: a hub id as it is, a local folder by its own name
    (the page never shows a path on the server's disk)."""
    return runner.describe().replace(str(runner.source), runner.name, 1)


def build_app(runner, ar_model=None, concurrency: int = 64) -> gr.Blocks:
    """The whole demo on one DiffusionGemma runner (dg.engine.runner.Runner: in this process or a worker
    process) and an optional separate AR model, queue enabled.

    `concurrency` bounds the open events per listener; the model itself is shared by dg.engine.turns,
    whose line shows a waiting user their place (Gradio's own queue would not show it in the page)."""
    files.private_cache()  # Gradio's copies and uploads go to the private, bounded folder
    with gr.Blocks(title="DiffusionGemma, step by step") as demo:
        with gr.Row(equal_height=True):
            gr.Markdown(f"# DiffusionGemma, step by step\n`{header(runner)}`", elem_id="dg-header")
            presenter = gr.Checkbox(label="Presenter view", info="full-width canvas, large cells, for a room",
                                    scale=0, min_width=220)
        presenter.change(None, presenter, None, js=PRESENTER_JS)
        demo.load(None, js=RANGE_JS)
        shared = RunState.create()  # this session's finished runs, for the replay; every session's live runs
        with gr.Tab("Generate"):
            generate = generate_tab.build(runner, shared)
        with gr.Tab("Race"):
            race_tab.build(runner, shared, generate, ar_model)
        with gr.Tab("Learn"):
            learn_tab.build(runner, shared, generate)
        generate.picks.wire()  # once every tab added its views
    return files.watch(guard_inputs(demo.queue(default_concurrency_limit=concurrency)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(loaded, ar_model=None, *, in_process: bool = True):
    """The app on `loaded` (dg.loading.load's) on a free local port, in this process; yields its URL and
    closes it afterwards. `in_process=False`: the model runs in a worker process loaded from `loaded.source`
    (dg.engine.worker), closed with the app."""
    runner = InProcess.of(loaded) if in_process else start_worker(loaded.source, loaded.device)
    try:
        with serve_runner(runner, ar_model) as url:
            yield url
    finally:
        runner.close()


@contextmanager
def serve_runner(runner, ar_model=None):
    """The app on a runner already started (dg.engine.runner.Runner) on a free local port; yields its URL and
    closes the app afterwards, leaving the runner open."""
    threads = torch.get_num_threads()
    try:
        demo = build_app(runner, ar_model)
        port = free_port()
        demo.launch(prevent_thread_lock=True, server_port=port, quiet=True, **LAUNCH)
        try:
            yield f"http://127.0.0.1:{port}/"
        finally:
            demo.close()
    finally:
        torch.set_num_threads(threads)


def start_replicas(spec, model):
    """The runner of Ray Serve replicas of `model` (dg.engine.replicas, the only import of Ray): the line gets
    as many places per replica as one model has."""
    from dg.engine import replicas

    runner = replicas.start_replicas(spec, model)
    TURNS.slots *= spec.max_replicas
    return runner


def main() -> None:
    from dg.loading import load

    parser = argparse.ArgumentParser(description="Watch DiffusionGemma denoise its canvas.")
    parser.add_argument("--model", default=None, help="checkpoint folder or cached hub id (default: embedded tiny)")
    parser.add_argument("--ar-model", default=None, help="a separate causal LM to race through generate()")
    parser.add_argument("--port", type=int, default=None,
                        help="default: $GRADIO_SERVER_PORT, else 7860 or the next free port")
    parser.add_argument("--host", default=None, help="default: $GRADIO_SERVER_NAME, else 127.0.0.1 (0.0.0.0: the LAN)")
    parser.add_argument("--share", action="store_true")
    parser.add_argument("--path", "--ar-path", dest="path", choices=PATHS, default="auto",
                        help="how the passes run (dg.paths): eager, compiled (AR's step), graphs; auto: graphs on "
                             "CUDA, eager on a CPU")
    parser.add_argument("--in-process", action="store_true",
                        help="run the model in a thread of the server's process, not in its worker process")
    parser.add_argument("--replicas", default=None, metavar="N|MIN-MAX",
                        help="serve runs from N Ray Serve replicas of the model (MIN-MAX: autoscaled between them)")
    parser.add_argument("--ray-address", default=None,
                        help="the Ray cluster of --replicas (default: $RAY_ADDRESS, else a local Ray on 127.0.0.1)")
    args = parser.parse_args()
    runner = None
    try:  # the model loads first: a separate AR model goes where the diffusion model left room
        if args.ray_address and not args.replicas:
            raise ValueError("--ray-address starts replicas there: give --replicas N too")
        if args.replicas:
            try:
                from dg.engine.replicas import ReplicaSpec
            except ModuleNotFoundError as err:  # the app's quick start installs no Ray
                raise ValueError(f"--replicas needs Ray Serve ({err.name} is not installed): "
                                 "pip install -r requirements.txt") from None

            runner = start_replicas(ReplicaSpec.parse(args.replicas, address=args.ray_address), args.model)
        else:
            runner = (InProcess.of(load(args.model, path=args.path)) if args.in_process
                      else start_worker(args.model, path=args.path))
        ar_model = load_ar_model(args.ar_model) if args.ar_model else None
    except (FileNotFoundError, ValueError) as err:  # one line, exit code 2, as the CLI's bad input
        if runner is not None:
            runner.close()
        print(f"app.py: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    share_cpu(runner.device)
    runner.yield_cpu()  # from here on the app's threads are nicer than the model's (a worker process)
    files.remove_on_exit()  # SIGTERM too removes the files handed out
    print(runner.describe())
    try:  # a port or host left as None is Gradio's to pick: its environment variables, then its defaults
        build_app(runner, ar_model).launch(server_port=args.port, server_name=args.host, share=args.share,
                                           **LAUNCH)
    except OSError as err:
        if "port" not in str(err):  # Gradio's "Cannot find empty port in range: …"
            raise
        busy = f"port {args.port} is taken" if args.port is not None else "no free port in Gradio's range"
        raise SystemExit(f"app.py: {busy}; pass another --port N, or leave --port out to take the next free "
                         "one") from None
    finally:
        runner.close()
