"""Command line: generate with the instrumented sampler (or AR mode) and watch it in the terminal; race the modes.

    python -m dg generate --prompt "What is 2487 + 3356?" --thinking
    python -m dg generate --model google/diffusiongemma-26B-A4B-it --prompt "Why is the sky blue?" --json
    python -m dg generate --mode ar --prompt "Solve the sudoku: 12.4/3.12/2.41/41.3" --seed 0
    python -m dg race                                 # the Race tab's three lanes, printed as they run

`--seed N` calls `torch.manual_seed(N)` right before generation, so with `--backend torch` the tokens
equal transformers' `model.generate()` after the same seed. Bad input exits with code 2 and a
one-line message.
"""

import argparse
import json
import math
import os
import shutil
import sys

from dg.config import BACKENDS, KNOBS, MODES, SamplerConfig, check_seed
from dg.paths import PATHS
from dg.trace import STOP_LABELS, Trace, record_to_dict


def add_generate_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="checkpoint folder or cached hub id (default: embedded tiny)")
    parser.add_argument("--prompt", required=True, help="the user's message")
    parser.add_argument("--image", action="append", default=[], help="image file (repeatable)")
    parser.add_argument("--system", default=None, help="optional system prompt")
    parser.add_argument("--thinking", action="store_true", help="enable thinking mode (<|think|>)")
    parser.add_argument("--mode", choices=MODES, default="diffusion",
                        help="hybrid: diffusion drafts, AR verifies (greedy AR's tokens)")
    parser.add_argument("--seed", type=int, default=None, help="torch.manual_seed right before generation")
    parser.add_argument("--device", default=None, help="cpu / cuda (default: cuda when available)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the live view")
    parser.add_argument("--draft", default=None,
                        help="reply text to start from (warm start); with blanks {{n}} (n free tokens) or a final "
                             "{{...}} (the rest) its text is pinned and only the blanks are denoised (infill)")
    parser.add_argument("--path", "--ar-path", dest="path", choices=PATHS, default="auto",
                        help="how the passes run (dg.paths): eager, compiled (AR's step), graphs; auto: graphs on "
                             "CUDA, eager on a CPU")
    parser.add_argument("--sample", action="store_true", help="AR mode: sample instead of greedy")
    parser.add_argument("--ar-temperature", type=float, default=1.0, help="AR mode sampling temperature")
    for knob in KNOBS:
        parser.add_argument("--" + knob.name.replace("_", "-"), type=knob.kind, default=None,
                            help=f"{knob.help} (default: the checkpoint's)")
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="sampling-step path (torch = bit-exact with generate())")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr (exit code 2), as every other bad input is."""

    def error(self, message):
        self.exit(2, f"error: {message} (python -m dg generate --help lists the flags)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m dg", description="DiffusionGemma, live.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_generate_args(sub.add_parser("generate", help="generate and show every denoising step"))
    add_race_args(sub.add_parser("race", help="race diffusion, AR and hybrid on one prompt and print every lane"))
    return parser


def add_race_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="local folder or hub id (default: the embedded model)")
    parser.add_argument("--ar-model", default=None, help="a separate causal LM for the AR lane")
    parser.add_argument("--prompt", default=None, help="default: the Race tab's, a sum of three numbers, thinking on")
    parser.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=None,
                        help="default: on for the default prompt, off for one given with --prompt")
    parser.add_argument("--seed", type=int, default=0)


def run_race(args) -> None:
    """The Race tab's three lanes on one prompt: each lane's line as it runs, then its text and the verdict."""
    from dg.engine.race import start_race
    from dg.engine.runner import InProcess
    from dg.examples import SkillExamples
    from dg.devices import share_cpu
    from dg.loading import load, load_ar_model
    from dg.view.tables import side_stats, side_text, verdict

    seed = check_seed(args.seed)  # before the model loads: a bad flag is instant
    reference = SkillExamples.load()
    if args.prompt is None:
        row = reference.race_example()
        args.prompt, args.thinking = row.prompt, row.thinking if args.thinking is None else args.thinking
    loaded = InProcess.of(load(args.model))
    ar_model = load_ar_model(args.ar_model) if args.ar_model else None
    share_cpu(loaded.device)
    race = start_race(loaded, args.prompt, thinking=bool(args.thinking), seed=seed, ar_model=ar_model)
    names = list(race.lanes)
    tokenizers = {"diffusion": loaded.tokenizer, "AR": race.ar_tokenizer, "hybrid": loaded.tokenizer}
    for frame in race.frames(fps=2):
        print("\n".join(f"{name:<9} {side_stats(trace)}" for name, trace in zip(names, frame)))
    lanes = dict(zip(names, frame))
    for name, trace in lanes.items():
        print(f"{name + ':':<10}", side_text(trace, tokenizers[name]))
    if ar_model is not None:
        print(f"hybrid: {race.hybrid_label}")
    print(verdict(lanes, {name: reference.check(args.prompt, None, trace, tokenizers[name])
                          for name, trace in lanes.items()}))


def run_generate(args) -> Trace:
    import torch

    from dg.drafts import draft_for
    from dg.devices import share_cpu
    from dg.loading import load
    from dg.prompts import check_inputs
    from dg.modes import stream_mode
    from dg.prompts import build_inputs

    overrides = {k.name: getattr(args, k.name) for k in KNOBS}
    overrides["backend"] = args.backend
    seed = None if args.seed is None else check_seed(args.seed)
    if args.mode == "ar" and args.sample and not (math.isfinite(args.ar_temperature) and args.ar_temperature > 0):
        raise ValueError(f"--ar-temperature must be a finite number > 0, got {args.ar_temperature}")
    if args.draft is not None and args.mode != "diffusion":  # before the model loads: a flag error is instant
        raise ValueError(f"--draft seeds the diffusion canvas; it does not apply to --mode {args.mode}")
    loaded = load(args.model, device=args.device, path=args.path, warm=False)  # one run: nothing to prepare ahead
    share_cpu(loaded.device)  # threads as the app picks them
    config = SamplerConfig.from_generation_config(loaded.model.generation_config, **overrides)
    check_backend(config.backend, loaded.device)
    inputs = build_inputs(loaded.processor, args.prompt, images=args.image or None, thinking=args.thinking,
                          system=args.system, device=loaded.device)
    check_inputs(loaded.model, inputs, config)
    draft = None if args.draft is None else draft_for(loaded.model, loaded.tokenizer, args.draft,
                                                      config.max_new_tokens, seed)
    if seed is not None:
        torch.manual_seed(seed)
    options = {"greedy": not args.sample, "temperature": args.ar_temperature} if args.mode == "ar" else {}
    view = None if args.json else LiveView(loaded.tokenizer)
    trace = Trace()
    for record in stream_mode(loaded.model, args.mode, inputs, config, draft=draft, path=loaded.path, **options):
        trace.add(record)
        if view:
            view.show(trace, record)
    if args.json:
        print(json.dumps(result_json(trace, loaded.tokenizer)))
    return trace


def check_backend(backend: str, device) -> None:
    """`--backend triton` needs a CUDA device (on CPU only under TRITON_INTERPRET=1, for tests)."""
    if backend == "triton" and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"--backend triton needs a CUDA device, not {device}; use --backend torch or auto")


def result_json(trace: Trace, tokenizer) -> dict:
    from dg.prompts import decode_reply

    reply = decode_reply(tokenizer, trace.token_ids)
    metrics = trace.metrics()
    return {
        "text": tokenizer.decode(trace.token_ids, skip_special_tokens=False),
        "thought": reply.thought,
        "answer": reply.answer,
        "thought_closed": reply.thought_closed,
        "token_ids": trace.token_ids,
        "forward_passes": metrics["nfe"],
        "tokens_per_forward": metrics["tpf"],
        "seconds": metrics["wall_s"],
        "finish_reason": trace.end.finish_reason if trace.end else None,
        "prompt_tokens": trace.start.prompt_length if trace.start else None,
        "metrics": metrics,
        "canvases": [record_to_dict(c) for c in trace.canvases],
        "steps": [record_to_dict(s) for s in trace.steps] or [record_to_dict(t) for t in trace.tokens],
        "rounds": [record_to_dict(r) for r in trace.rounds],
        "pinned": sorted({s.canvas * trace.start.canvas_length + int(i) for s in trace.steps if s.pinned is not None
                          for i in s.pinned.nonzero()[0]}),
    }


class LiveView:
    """A terminal view: one line per step, redrawn in place on a terminal, then the final reply."""

    def __init__(self, tokenizer, out=None):
        self.tokenizer, self.out = tokenizer, out or sys.stdout
        self.tty = self.out.isatty()
        self.width = shutil.get_terminal_size((100, 20)).columns

    def _line(self, text: str, final: bool) -> None:
        text = text.replace("\n", "⏎")[: self.width - 1]
        if self.tty and not final:
            self.out.write("\r\x1b[2K" + text)
        else:
            self.out.write(("\r\x1b[2K" if self.tty else "") + text + "\n")
        self.out.flush()

    def show(self, trace: Trace, record) -> None:
        from dg.prompts import decode_reply

        if record.kind == "step":
            draft = self.tokenizer.decode(record.argmax.tolist(), skip_special_tokens=False)
            self._line(f"canvas {record.canvas + 1} step {record.step:2d} τ={record.temperature:.2f} "
                       f"accepted {record.n_accepted:3d} H̄={record.mean_entropy:.3f} │ {draft}", final=False)
        elif record.kind == "canvas":
            text = self.tokenizer.decode(record.committed.tolist(), skip_special_tokens=True)
            self._line(f"canvas {record.canvas + 1} committed after {record.steps} steps "
                       f"({STOP_LABELS[record.stop_reason]}{', EOS' if record.eos else ''}) │ {text}", True)
        elif record.kind == "round":
            self._line(f"round {record.round}: AR accepted {record.accepted} draft tokens"
                       f"{'' if record.bonus is None else ' + its own'} │ "
                       f"{self.tokenizer.decode(trace.token_ids, skip_special_tokens=True)}", final=False)
        elif record.kind == "token" and self.tty:
            self._line(self.tokenizer.decode(trace.token_ids, skip_special_tokens=True), final=False)
        elif record.kind == "end":
            reply = decode_reply(self.tokenizer, trace.token_ids)
            m = trace.metrics()
            if reply.thinking:
                self._line("thought: " + reply.thought + ("" if reply.thought_closed else "  [never closed]"), True)
            self.out.write(f"\n{reply.answer}\n\n")
            self.out.write(f"{m['tokens']} tokens, {m['nfe']} forward passes, TPF {m['tpf']:.2f}, "
                           f"{m['wall_s']:.2f} s, {m['effective_tok_s']:.1f} tok/s ({record.finish_reason})\n")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "generate":
            run_generate(args)
        elif args.command == "race":
            run_race(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    return 0
