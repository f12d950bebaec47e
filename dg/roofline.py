"""Why diffusion is fast: a roofline of one AR token and one canvas step of a MoE DiffusionGemma.

A forward pass takes at least as long as reading its weights at the device's memory bandwidth, and at
least as long as its matmul FLOPs at the device's peak FLOP/s; the larger of the two bounds it, and
names what binds (report §1, §6). No efficiency factor is fitted: measured figures are placed against
the bound as the fraction of it they reach.

Counted per pass (weights only; attention over the KV cache and the sampling step's passes over the
logits are left out: small against the weights at short contexts, and named where measured figures
include them):
- dense parameters D: everything but the routed experts (attention, the shared MLP, router, norms, and
  the tied embedding read whole as lm_head); the decoder's self-conditioning MLP only in a canvas pass;
- one expert of one layer, P_e parameters; L layers of E experts, top-k routed per token.
- AR, B users, one token each: bytes = b · (D_ar + L · n_ar(B) · P_e), n_ar(B) = E (1 − (1 − k/E)^B)
  distinct experts per layer (uniform routing; n_ar(1) = k); FLOPs = 2 · B · (D_ar + L · k · P_e).
- Canvas step, B users, C positions each: bytes = b · (D + L · n_c(B) · P_e), n_c(B) = E (1 − (1 − m/E)^B),
  m the distinct experts one canvas touches (report §6 measures ~84 of 128 on the release; uniform routing
  would give E (1 − (1 − k/E)^C)); FLOPs = 2 · B · C · (D + L · k · P_e).
- time bound t = max(bytes / bandwidth, FLOPs / peak); tok/s bound: AR B / t, diffusion B · TPF / t,
  TPF as report §3.4 (tokens per forward: the report's 1,456 tok/s is TPF 19.74 / 13.56 ms).

    python -m pytest tests/test_roofline.py -q
"""

from dataclasses import dataclass, replace

BYTES_PER_PARAM = {"fp8": 1, "bf16": 2, "fp32": 4}


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth_gb_s: float
    tflop_s: dict  # dtype → dense peak TFLOP/s
    memory_gb: float | None
    source: str

    def peak_tflop_s(self, dtype: str) -> float:
        return self.tflop_s.get(dtype, self.tflop_s.get("any", 0.0))


DEVICES = {  # datasheet figures: HBM/GDDR bandwidth, dense tensor-core peak (no sparsity)
    "H100 SXM": Device("H100 SXM", 3350.0, {"bf16": 989.4, "fp8": 1978.9}, 80.0, "NVIDIA H100 datasheet"),
    "H200": Device("H200", 4800.0, {"bf16": 989.4, "fp8": 1978.9}, 141.0, "NVIDIA H200 datasheet"),
    "RTX 6000 Ada": Device("RTX 6000 Ada", 960.0, {"bf16": 364.2, "fp8": 728.5}, 48.0, "NVIDIA RTX 6000 Ada datasheet"),
}


def device_named(name: str) -> str | None:
    """The `DEVICES` key of a GPU by the name CUDA gives it ("NVIDIA H200" → "H200"), or None."""
    return next((key for key in DEVICES if key.split()[0] in name), None)


def measured_cpu(copy_gb_s: float, matmul_gflop_s: float, threads: int = 1) -> Device:
    """This CPU as `python -m dg.bench.sweep` measured it: copy bandwidth and a float32 matmul's FLOP/s."""
    return Device(f"this CPU ({threads} thread, measured)", copy_gb_s, {"any": matmul_gflop_s / 1e3}, None,
                  "python -m dg.bench.sweep")


@dataclass(frozen=True)
class ModelShape:
    """Parameter counts of a MoE DiffusionGemma text tower, as `shape_of` counts them."""

    name: str
    dense: int  # parameters read by every encoder (AR) pass: all but the routed experts and self-conditioning
    self_conditioning: int  # the decoder's self-conditioning MLP: canvas passes only
    expert: int  # one routed expert of one layer
    layers: int
    experts: int
    top_k: int
    canvas: int
    experts_per_canvas: float  # distinct experts per layer one canvas touches

    @property
    def total(self) -> int:
        return self.dense + self.self_conditioning + self.layers * self.experts * self.expert

    @property
    def active(self) -> int:
        """Parameters one token multiplies through (report: 3.8 B of 25.2 B for 26B-A4B)."""
        return self.dense + self.layers * self.top_k * self.expert

    def uniform_experts_per_canvas(self) -> float:
        return distinct_experts(self.experts, self.top_k / self.experts, self.canvas)


def distinct_experts(experts: int, share: float, draws: int) -> float:
    """Expected distinct experts of a layer when each of `draws` independent draws touches each expert
    with probability `share`: E (1 − (1 − share)^draws)."""
    return experts * (1.0 - (1.0 - share) ** draws)


def shape_of(model, name: str, experts_per_canvas: float | None = None) -> ModelShape:
    """Count a DiffusionGemma's text-tower parameters (a meta-device model counts the same); the vision
    tower is left out (it runs once per image, in the encoder). Tied weights count once."""
    text = model.config.text_config
    seen, dense, sc, experts = set(), 0, 0, 0
    for pname, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen or "vision" in pname:
            continue
        seen.add(id(p))
        if ".experts." in pname:
            experts += p.numel()
        elif "self_conditioning" in pname:
            sc += p.numel()
        else:
            dense += p.numel()
    layers, e = text.num_hidden_layers, text.num_experts
    shape = ModelShape(name, dense, sc, experts // (layers * e), layers, e, text.top_k_experts,
                       model.config.canvas_length, 0.0)
    m = shape.uniform_experts_per_canvas() if experts_per_canvas is None else experts_per_canvas
    return replace(shape, experts_per_canvas=m)


# google/diffusiongemma-26B-A4B-it's text tower as `shape_of` counts it on the release config built on
# the meta device (dg.bench.device.RELEASE_TEXT_CONFIG; tests/test_roofline.py recounts it), with the
# report's ~84 distinct experts per 256-token canvas (§6).
RELEASE = ModelShape("26B-A4B", dense=2_395_156_480, self_conditioning=17_844_992, expert=5_947_392, layers=30,
                     experts=128, top_k=8, canvas=256, experts_per_canvas=84.0)

# The report's measured figures (H100, FP8, batch 1; §1, §6): diffusion at TPF 19.74, AR, AR + MTP, one
# canvas step and its sampling part, and the concurrency up to which diffusion beats AR + MTP.
REPORT = dict(device="H100 SXM", dtype="fp8", diffusion_tok_s=1456.0, ar_tok_s=204.0, ar_mtp_tok_s=303.0,
              tpf=19.74, step_ms=13.56, sampling_ms=3.06, crossover_users=32)


@dataclass(frozen=True)
class Bound:
    """One pass's lower bound on time: bytes at the bandwidth, FLOPs at the peak, and which binds."""

    bytes: float
    flops: float
    memory_s: float
    compute_s: float

    @property
    def seconds(self) -> float:
        return max(self.memory_s, self.compute_s)

    @property
    def binds(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"

    @property
    def intensity(self) -> float:
        """FLOPs per byte read; the device's ridge point is peak FLOP/s / bandwidth."""
        return self.flops / self.bytes


def _bound(nbytes: float, flops: float, device: Device, dtype: str) -> Bound:
    peak = device.peak_tflop_s(dtype) * 1e12
    if device.bandwidth_gb_s <= 0 or peak <= 0:
        raise ValueError(f"{device.name} needs a bandwidth and a {dtype} FLOP/s above 0")
    return Bound(nbytes, flops, nbytes / (device.bandwidth_gb_s * 1e9), flops / peak)


def _check(dtype: str, users: int) -> int:
    if dtype not in BYTES_PER_PARAM:
        raise ValueError(f"dtype must be one of {', '.join(BYTES_PER_PARAM)}, got {dtype!r}")
    if users < 1:
        raise ValueError(f"users must be >= 1, got {users}")
    return BYTES_PER_PARAM[dtype]


def ar_token(model: ModelShape, device: Device, dtype: str, users: int = 1) -> Bound:
    """One AR forward for `users` users, one token each (the module docstring's AR formulas)."""
    b = _check(dtype, users)
    touched = distinct_experts(model.experts, model.top_k / model.experts, users)
    nbytes = b * (model.dense + model.layers * touched * model.expert)
    return _bound(nbytes, 2.0 * users * model.active, device, dtype)


def canvas_step(model: ModelShape, device: Device, dtype: str, users: int = 1, canvas: int | None = None,
                experts_per_canvas: float | None = None) -> Bound:
    """One decoder step over `users` canvases of `canvas` positions (the module docstring's formulas)."""
    b = _check(dtype, users)
    c = model.canvas if canvas is None else canvas
    m = model.experts_per_canvas if experts_per_canvas is None else experts_per_canvas
    if c < 1 or not 0 < m <= model.experts:
        raise ValueError(f"canvas must be >= 1 and experts per canvas in (0, {model.experts}], got {c}, {m}")
    touched = distinct_experts(model.experts, m / model.experts, users)
    dense = model.dense + model.self_conditioning
    nbytes = b * (dense + model.layers * touched * model.expert)
    return _bound(nbytes, 2.0 * users * c * (dense + model.layers * model.top_k * model.expert), device, dtype)


def tok_s_bounds(model: ModelShape, device: Device, dtype: str, tpf: float, users: int = 1, **canvas) -> dict:
    """Aggregate tokens/s bounds of both modes for `users` users: AR B / t, diffusion B · TPF / t."""
    if tpf <= 0:
        raise ValueError(f"tpf must be > 0, got {tpf}")
    ar, step = ar_token(model, device, dtype, users), canvas_step(model, device, dtype, users, **canvas)
    return {"ar": users / ar.seconds, "diffusion": users * tpf / step.seconds, "ar_bound": ar, "step_bound": step}


def crossover_users(model: ModelShape, device: Device, dtype: str, tpf: float, limit: int = 4096, **canvas):
    """The fewest users at which AR's tok/s bound reaches diffusion's; None up to `limit`."""
    for users in range(1, limit + 1):
        bounds = tok_s_bounds(model, device, dtype, tpf, users, **canvas)
        if bounds["ar"] >= bounds["diffusion"]:
            return users
    return None


def fraction(measured_s: float, bound: Bound) -> float:
    """How much of its bound a measured pass reaches: bound time / measured time (1.0 = at the roof)."""
    if measured_s <= 0:
        raise ValueError(f"a measured time must be > 0, got {measured_s}")
    return bound.seconds / measured_s
