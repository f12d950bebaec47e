"""Device check: a full-size random-init DiffusionGemma 26B-A4B on one CUDA GPU, for ms/step and TPS.

    python -m dg.bench --device-check

Random weights never settle, so every canvas runs exactly `steps` denoising steps (the confidence
threshold is set below any reachable mean entropy); EOS is disabled so every run fills the same
number of canvases. The model is built on the meta device and materialised on the GPU with the
checkpoint's own initialisers (seconds, instead of minutes of CPU init and a 50 GB copy); every weight the
encoder and decoder share is allocated once (`allocate_once`).

Each diffusion run is timed twice: once plain (ms/step, tokens/s), once with the device drained
around every phase of a step (decoder forward, sampling, recording), which splits a step's time at
the cost of a few synchronisations. `modes=("compiled",)` times diffusion and AR again on a static KV
cache with compiled passes (`dg.passes.use_fast_paths`), the way `generate(cache_implementation="static")`
runs; the summary takes the faster AR and the faster diffusion. `modes=("hybrid",)` times hybrid decoding
(`dg.hybrid`) beside AR on the same weights: random drafts rarely agree with AR, so a round verifies about one
token, and what it measures is the cost of a round at full size, not hybrid's speed-up.
`python -m dg.bench.gpu_check` runs this check as parts of its report.
"""

import statistics
import time
from contextlib import contextmanager

import torch

from dg import paths, sampler
from dg.ar import generate_ar
from dg.bench.common import format_table, timed
from dg.config import SamplerConfig
from dg.hybrid import generate_hybrid
from dg.passes import encode, new_cache, positions, use_fast_paths
from dg.sampler import generate_diffusion

# google/diffusiongemma-26B-A4B-it's text tower (25.2 B total / 3.8 B active). DiffusionGemmaConfig()'s
# own defaults are a dense 2304-wide model with num_experts=None, which does not even build.
RELEASE_TEXT_CONFIG = dict(
    vocab_size=262_144, hidden_size=2816, intermediate_size=2112, num_hidden_layers=30,
    num_attention_heads=16, num_key_value_heads=8, num_global_key_value_heads=2, head_dim=256,
    global_head_dim=512, num_experts=128, top_k_experts=8, moe_intermediate_size=704,
    sliding_window=1024, max_position_embeddings=262_144,
)
MODES = ("eager", "compiled", "hybrid")  # what device_check times
NEVER_CONFIDENT = 1e-12  # mean entropy of a random model's softmax is never this low
# Datasheet memory bandwidth (GB/s) by CUDA device name, most specific first: "H100 PCIe" must match
# before "H100", "GH200" before "H200".
PEAK_BANDWIDTH_GB_S = (
    ("GH200", None),  # 480 GB (4.0 TB/s) and 144 GB (4.9 TB/s) parts share the name
    ("H200", 4800.0),
    ("H100 PCIe", 2000.0),
    ("H100 NVL", 3900.0),
    ("H100", 3350.0),  # SXM: "NVIDIA H100 80GB HBM3"
    ("A100 80GB PCIe", 1935.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100", 1555.0),  # the 40 GB parts, SXM and PCIe
    ("L40", 864.0),  # L40 and L40S
    ("L4", 300.0),
    ("A10G", 600.0),
)
# dg.sampler's names for the phases of one step, as `phase_timers` wraps them.
# (module, name) of each phase's call in a diffusion run's loop: the passes go through dg.paths, the sampling
# step and the record are dg.sampler's
STEP_PHASES = {(paths, "decode"): "decoder_forward", (sampler, "sample_step"): "sampling",
               (sampler, "step_record"): "recording", (paths, "encode"): "encoder"}


def peak_bandwidth_gb_s(device_name: str) -> float | None:
    """The datasheet memory bandwidth of a CUDA device by its name; None when unknown."""
    for key, gb_s in PEAK_BANDWIDTH_GB_S:
        if key in device_name:
            return gb_s
    return None


def release_config():
    from transformers import DiffusionGemmaConfig

    return DiffusionGemmaConfig(text_config=dict(RELEASE_TEXT_CONFIG))


def require_cuda(what: str = "--device-check", instead: str = "drop --device-check for the tiny-model benchmark"
                 ) -> torch.device:
    if not torch.cuda.is_available():
        raise SystemExit(
            f"{what} needs a CUDA GPU, and torch sees none "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}). "
            f"Run it on a GPU machine, or {instead}.")
    return torch.device("cuda")


def allocate_once(model, device) -> int:
    """Give every parameter and buffer of a meta-built model storage on `device`, once per tensor however
    many modules share it; returns the bytes allocated.

    `Module.to_empty` allocates per module, so every weight the encoder and decoder share (and the tied
    lm_head) would get a copy of its own until `tie_weights()` runs: 51.4 B parameters at the release's
    size instead of 25.4 B, 95.7 GiB of bf16 at the peak instead of 47.3 GiB.
    """
    done = {}  # id(meta tensor) -> (meta tensor, its allocation); the meta tensor is kept so its id stays unique
    allocated = 0
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, tensor in table.items():
                if tensor is None:
                    continue
                if id(tensor) not in done:
                    data = torch.empty_like(tensor, device=device)
                    if isinstance(tensor, torch.nn.Parameter):
                        data = torch.nn.Parameter(data, requires_grad=tensor.requires_grad)
                    done[id(tensor)] = (tensor, data)
                    allocated += data.numel() * data.element_size()
                table[name] = done[id(tensor)][1]
    return allocated


def materialise(config, device, dtype=torch.bfloat16, seed: int = 0):
    """Build on the meta device, allocate on `device` (each shared weight once), run the model's own
    initialisers there."""
    from transformers import DiffusionGemmaForBlockDiffusion

    with torch.device("meta"):
        model = DiffusionGemmaForBlockDiffusion._from_config(config, dtype=dtype)
    allocate_once(model, device)
    torch.manual_seed(seed)
    model.initialize_weights()
    for module in model.modules():  # transformers 5.23's _init_weights skips the encoder layers' scalar
        if hasattr(module, "layer_scalar"):
            module.layer_scalar.fill_(1.0)
    model.tie_weights()
    return model.eval()


def _text_id_limit(config) -> int:
    """Random prompt ids stay below every image/audio/video marker id (those need pixel inputs)."""
    markers = [v for k, v in config.to_dict().items() if k.endswith("_token_id") and isinstance(v, int) and v > 2]
    return min([config.text_config.vocab_size, *markers])


def _median_gap_ms(times: list[float]) -> float:
    gaps = [b - a for a, b in zip(times, times[1:])]
    return 1e3 * statistics.median(gaps) if gaps else float("nan")


def time_prefill(model, prompt_ids, repeats: int = 3) -> float:
    """Median ms of one encoder pass over the whole prompt into a fresh KV cache."""
    length = prompt_ids.shape[1]
    position_ids = positions(0, length, prompt_ids.device)
    mask = torch.ones((1, length), dtype=torch.bool, device=prompt_ids.device)
    with torch.no_grad():
        run = lambda: encode(model, prompt_ids, new_cache(model), position_ids, mask, {})  # noqa: E731
        run()
        return 1e3 * statistics.median(timed(run, prompt_ids.device)[1] for _ in range(repeats))


@contextmanager
def phase_timers(device):
    """Time the phases of the sampler's steps: {phase: [seconds, calls]}, the device drained around each.

    Wraps the module-level calls the sampler's loop makes (`STEP_PHASES`) for the duration of the block, so
    what is timed is the sampler's real loop; whatever falls between the phases is the step's "other".
    """
    totals = {phase: [0.0, 0] for phase in STEP_PHASES.values()}
    originals = {(module, name): getattr(module, name) for module, name in STEP_PHASES}  # AttributeError if renamed

    def timed_phase(fn, phase):
        def run(*args, **kwargs):
            result, seconds = timed(lambda: fn(*args, **kwargs), device)
            totals[phase][0] += seconds
            totals[phase][1] += 1
            return result
        return run

    try:
        for (module, name), phase in STEP_PHASES.items():
            setattr(module, name, timed_phase(originals[module, name], phase))
        yield totals
    finally:
        for (module, name), fn in originals.items():
            setattr(module, name, fn)


def split_step(model, inputs: dict, config: SamplerConfig, device) -> dict:
    """ms per step of each phase (decoder forward, sampling, recording, other) over one synchronised run."""
    with phase_timers(device) as totals:
        torch.manual_seed(0)
        _, wall = timed(lambda: generate_diffusion(model, inputs, config), device)
    (encoder_s, canvases), steps = totals["encoder"], totals["decoder_forward"][1]
    split = {phase: 1e3 * totals[phase][0] / steps for phase in ("decoder_forward", "sampling", "recording")}
    total = 1e3 * (wall - encoder_s) / steps
    split.update(other=total - sum(split.values()), total=total)
    return {"split_ms_per_step": split, "encoder_ms_per_canvas": 1e3 * encoder_s / canvases,
            "synchronised_wall_s": wall, "synchronised_steps": steps}


def time_diffusion(model, prompt_ids, steps: int, canvases: int, backend: str, split: bool = True) -> dict:
    """ms/step and tokens/s of `canvases` canvases of `steps` steps, on the model's fast paths (`use_fast_paths`);
    `warm_up_s` is a run before them (one canvas; two when compiled, so a committed canvas's encoder pass is
    compiled too)."""
    canvas = model.config.canvas_length
    config = SamplerConfig(max_denoising_steps=steps, confidence_threshold=NEVER_CONFIDENT,
                           max_new_tokens=canvas * canvases, backend=backend)
    inputs = {"input_ids": prompt_ids}
    warm_up = config.replace(max_new_tokens=canvas * min(canvases, 2 if getattr(model, "dg_compile", False) else 1))
    _, warm_up_s = timed(lambda: generate_diffusion(model, inputs, warm_up), prompt_ids.device)
    torch.manual_seed(0)
    trace, wall = timed(lambda: generate_diffusion(model, inputs, config), prompt_ids.device)
    # steps 2..N of each canvas: a step's gap to the previous one is one decoder pass + sampling
    step_ms = statistics.median(
        _median_gap_ms([r.t for r in trace.steps_of(k)]) for k in range(len(trace.canvases)))
    metrics = trace.metrics()
    result = {"backend": backend, "fast_paths": fast_paths_label(model), "warm_up_s": warm_up_s,
              "ms_per_step": step_ms, "wall_s": wall, "tokens": metrics["tokens"],
              "tps": metrics["tokens"] / wall, "tpf": metrics["tpf"], "steps": metrics["total_steps"],
              "canvases": metrics["canvases"]}
    if split:
        result.update(split_step(model, inputs, config, prompt_ids.device))
    return result


def time_ar(model, prompt_ids, n_tokens: int, cache: str = "dynamic", compile: bool | str = False) -> dict:
    """ms/token and tokens/s of greedy AR; `warm_up_s` is a 4-token run before it (it compiles, when compiled)."""
    inputs = {"input_ids": prompt_ids}
    path = "compiled" if compile else "eager"
    run = lambda n: generate_ar(model, inputs, SamplerConfig(max_new_tokens=n), eos_token_ids=(), path=path)  # noqa: E731
    use_fast_paths(model, cache, prompt_ids.shape[1] + n_tokens if cache == "static" else None, compile=compile)
    try:
        _, warm_up_s = timed(lambda: run(4), prompt_ids.device)
        trace, wall = timed(lambda: run(n_tokens), prompt_ids.device)
    finally:
        use_fast_paths(model, "dynamic")
    return {"fast_paths": f"{cache} cache" + _compiled_label(compile), "warm_up_s": warm_up_s,
            "ms_per_token": _median_gap_ms([r.t for r in trace.tokens]), "wall_s": wall,
            "tokens": len(trace.tokens), "tps": len(trace.tokens) / wall}


def time_hybrid(model, prompt_ids, tokens: int, steps: int, backend: str) -> dict:
    """tokens/s, tokens per round and ms per round of hybrid decoding (one denoising step per round, as the
    app runs it), `warm_up_s` a 4-token run before it. On random weights this is the cost of a round at full
    size: one decoder pass, a sampling step and one encoder pass over the canvas, for about one token."""
    config = SamplerConfig(max_denoising_steps=steps, confidence_threshold=NEVER_CONFIDENT, max_new_tokens=tokens,
                           backend=backend)
    inputs = {"input_ids": prompt_ids}
    _, warm_up_s = timed(lambda: generate_hybrid(model, inputs, config.replace(max_new_tokens=4)), prompt_ids.device)
    torch.manual_seed(0)
    trace, wall = timed(lambda: generate_hybrid(model, inputs, config), prompt_ids.device)
    metrics = trace.metrics()
    return {"backend": backend, "warm_up_s": warm_up_s, "wall_s": wall, "tokens": metrics["tokens"],
            "rounds": metrics["rounds"], "tokens_per_round": metrics["tokens_per_round"],
            "ms_per_round": 1e3 * wall / max(metrics["rounds"], 1), "tps": metrics["tokens"] / wall,
            "measures": "random weights: drafts rarely agree with AR, so this is a round's cost, not the speed-up"}


def _compiled_label(compile: bool | str) -> str:
    return "" if not compile else ", compiled" if compile is True else f", compiled ({compile})"


def fast_paths_label(model) -> str:
    static = model.generation_config.cache_implementation == "static"
    return f"{'static' if static else 'dynamic'} cache" + _compiled_label(getattr(model, "dg_compile", False))


def time_compiled(model, prompt_ids, steps: int, canvases: int, ar_tokens: int, backend: str,
                  compile: bool | str = True) -> dict:
    """Diffusion and AR on a static KV cache with compiled encoder/decoder passes (CUDA graphs on a GPU)."""
    length = prompt_ids.shape[1] + model.config.canvas_length * canvases
    use_fast_paths(model, "static", length, compile=compile)
    try:
        diffusion = time_diffusion(model, prompt_ids, steps, canvases, backend, split=False)
    finally:
        use_fast_paths(model, "dynamic")
    return {"diffusion": [diffusion], "ar": time_ar(model, prompt_ids, ar_tokens, cache="static", compile=compile)}


def summarise(result: dict) -> dict:
    """The fastest diffusion run and the fastest AR run of every mode timed, and what each cost."""
    runs = [*result.get("diffusion", []), *result.get("compiled", {}).get("diffusion", [])]
    ars = [r for r in (result.get("ar"), result.get("compiled", {}).get("ar")) if r]
    best = min(runs, key=lambda r: r["ms_per_step"])
    ar = min(ars, key=lambda r: r["ms_per_token"])
    if "hybrid" in result:  # hybrid, AR and diffusion timed in the same process on the same weights
        hybrid = result["hybrid"]
        return {"device": result["device"], "hybrid_tps": hybrid["tps"], "hybrid_tokens_per_round":
                hybrid["tokens_per_round"], "hybrid_ms_per_round": hybrid["ms_per_round"], "ar_tps": ar["tps"],
                "diffusion_tps": best["tps"], "hybrid_vs_ar": hybrid["tps"] / ar["tps"],
                "hybrid_vs_diffusion": hybrid["tps"] / best["tps"], "measures": hybrid["measures"]}
    return {"device": result["device"], "prefill_ms": result["prefill_ms"], "ms_per_step": best["ms_per_step"],
            "diffusion_tps": best["tps"], "ar_tps": ar["tps"], "tpf": best["tpf"],
            "decoder_step_vs_ar_token_cost": best["ms_per_step"] / ar["ms_per_token"],
            "backend": best["backend"], "diffusion_fast_paths": best["fast_paths"], "ar_fast_paths": ar["fast_paths"]}


def device_check(config=None, device=None, dtype=torch.bfloat16, prompt_length: int = 512, steps: int = 12,
                 canvases: int = 2, ar_tokens: int = 64, backends=("torch", "triton"), seed: int = 0,
                 modes=("eager",), compile: bool | str = True) -> dict:
    """Prefill ms, ms/step and TPS of dg diffusion (per sampling backend) and AR on random weights.

    `modes`: "eager" (a growing KV cache, eager passes: every backend, the step split) and/or "compiled" (a
    static cache and compiled passes: the fastest backend, no split; `compile` as `use_fast_paths` takes it);
    the summary takes the faster of each. "hybrid" times hybrid decoding for `ar_tokens` tokens beside eager AR
    and one diffusion run (the fastest backend); its summary is hybrid's tokens/s against both.

    With no arguments: the release's 26B-A4B config in bf16 on CUDA (SystemExit without CUDA).
    Tests pass a tiny config and the CPU to exercise the same code.
    """
    device = torch.device(device) if device is not None else require_cuda()
    name = "DiffusionGemma 26B-A4B (random init)" if config is None else "custom config (random init)"
    config = config if config is not None else release_config()
    start = time.perf_counter()
    model = materialise(config, device, dtype, seed)
    model.generation_config.eos_token_id = []  # every run fills `canvases` canvases
    init_s = time.perf_counter() - start
    prompt_ids = torch.randint(3, _text_id_limit(model.config), (1, prompt_length),
                               generator=torch.Generator().manual_seed(seed)).to(device)

    result = {"config": name,
              "params_b": sum(p.numel() for p in model.parameters()) / 1e9, "dtype": str(dtype).removeprefix("torch."),
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
              "init_s": init_s, "prompt_length": prompt_length, "canvas_length": model.config.canvas_length,
              "steps_per_canvas": steps, "canvases": canvases,
              "implementations": {"attention": model.config._attn_implementation,
                                  "experts": model.get_experts_implementation()[""]},
              "prefill_ms": time_prefill(model, prompt_ids)}
    if device.type != "cuda":
        backends = tuple(b for b in backends if b != "triton")
    if unknown := set(modes) - set(MODES):
        raise ValueError(f"modes must be among {MODES}, got {sorted(unknown)}")
    if "hybrid" in modes:  # beside eager AR and one diffusion run, its own baselines in this process
        result["hybrid"] = time_hybrid(model, prompt_ids, ar_tokens, steps, backends[-1])
        result["diffusion"] = [time_diffusion(model, prompt_ids, steps, canvases, backends[-1], split=False)]
        result["ar"] = time_ar(model, prompt_ids, ar_tokens)
    if "eager" in modes:
        result["diffusion"] = [time_diffusion(model, prompt_ids, steps, canvases, b) for b in backends]
        result["ar"] = time_ar(model, prompt_ids, ar_tokens)
    if "compiled" in modes:
        result["compiled"] = time_compiled(model, prompt_ids, steps, canvases, ar_tokens, backends[-1], compile)
    result["summary"] = summarise(result)
    return result


def format_device_check(result: dict) -> str:
    head = (f"device check: {result['params_b']:.1f} B params {result['dtype']} on {result['device']} "
            f"(materialised in {result['init_s']:.1f} s); prompt {result['prompt_length']} tokens, "
            f"{result['steps_per_canvas']} steps per {result['canvas_length']}-token canvas\n"
            f"encoder prefill: {result['prefill_ms']:.1f} ms")
    rows = []
    for part in (result, result.get("compiled", {})):
        rows += [{"mode": f"diffusion ({r['backend']} sampling, {r['fast_paths']})", "ms_per_step_or_token":
                  r["ms_per_step"], "tps": r["tps"], "tokens": r["tokens"], "tpf": r["tpf"], "warm_up_s": r["warm_up_s"],
                  **{f"{phase}_ms": ms for phase, ms in r.get("split_ms_per_step", {}).items() if phase != "total"}}
                 for r in part.get("diffusion", [])]
        if ar := part.get("ar"):
            rows.append({"mode": f"AR ({ar['fast_paths']})", "ms_per_step_or_token": ar["ms_per_token"],
                         "tps": ar["tps"], "tokens": ar["tokens"], "tpf": 1.0, "warm_up_s": ar["warm_up_s"]})
    split = [f"{phase}_ms" for phase in ("decoder_forward", "sampling", "recording", "other")]
    columns = ["mode", "ms_per_step_or_token", "tps", "tokens", "tpf", "warm_up_s", *split]
    return (head + "\n" + format_table(rows, columns)
            + "\n(the *_ms split comes from a second run with the device drained around each phase)")
