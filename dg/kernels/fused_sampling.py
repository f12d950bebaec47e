"""Fused Triton sampling step: one pass over the vocabulary per canvas position.

Reads the logits once and, with an online softmax over vocabulary tiles, produces the
temperature-scaled logits, the entropy of softmax(logits / τ), the argmax and a Gumbel-max sample,
so no (B, C, V) probability tensor is ever materialised. A second small kernel applies the entropy
bound (report §3.3) and renoises every position it does not accept.

    TRITON_INTERPRET=1 python -m pytest tests/kernels/test_fused_sampling.py -q   # CPU, small shapes
    python -m dg.bench                                                             # GB/s on CUDA

Layout, as in the Triton tutorials:
1. the reference, `dg.kernels.reference.sample_step_torch`;
2. the kernels: `_vocab_pass_kernel` (+ `_merge_splits_kernel`) and `_accept_renoise_kernel`;
3. the launchers, which check dtype, contiguity and shape;
4. `sample_step_triton`, what the dispatcher `dg.kernels.sampling.sample_step` calls.

`scaled_logits` (the next step's self-conditioning input) is written by the vocabulary kernel in
the same pass. Acceptance equals `entropy_bound_mask` for the same entropies; exactly tied non-zero
entropies are ordered by position (a stable sort), which torch.sort's default does not promise.

Randomness comes from Philox (`tl.randint4x`) keyed by one seed per call, with disjoint counter
ranges for the Gumbel noise and for the renoise tokens. The seed is drawn from torch's default CPU
generator when not given, so `torch.manual_seed(s)` makes runs reproducible; the samples are not
the same as the torch path's `torch.multinomial` ones (only that path reproduces `generate()` bit
for bit), but they follow the same distribution.
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from dg.kernels.launch import check_device, device_guard, round_to_bf16
from dg.kernels.reference import StepSample

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16)
MAX_SEED = 2**63 - 1
# Philox counters: the Gumbel noise of row r uses [r * K, (r + 1) * K), K ~ V / 4 < 2**31, all below 2**62;
# the renoise tokens use 2**62 + b * C + i, so the two never share a counter.
NOISE_COUNTER_BASE = 2**62
# Triton specialises an integer argument on its value (== 1, divisible by 16): a fresh seed every call would
# compile a second variant of a kernel (seconds) at about one call in 16. The seed is the only integer that
# changes from call to call (the others follow the shape); `draw_seed` keeps it below 2**31, so it is always i32.
PER_CALL_INTEGERS = ("seed",)

# ---------------------------------------------------------------------------------------------
# 1. Reference.
#
# `sample_step_torch` scales the logits (read V, write V), then softmax, multinomial, argmax and the
# Categorical entropy each read a (B, C, V) tensor again and softmax/entropy write (B, C, V) float32
# temporaries: about six reads and three writes of the vocabulary per position. The fused path
# reads the logits once and writes the scaled logits once (the caller needs them as the next step's
# self-conditioning input), i.e. 2 x B x C x V x itemsize bytes, the floor for this step.
# `entropy_bound_mask` is the reference for the acceptance rule.
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# 2. Kernels.
# ---------------------------------------------------------------------------------------------
@triton.jit
def _log2(x, FAST_LOG2: tl.constexpr):
    if FAST_LOG2:  # lg2.approx on CUDA; tl.log2 is a ~12-FMA libdevice polynomial
        return libdevice.fast_log2f(x)
    else:
        return tl.log2(x)


@triton.jit
def _gumbel_base2(random_bits, FAST_LOG2: tl.constexpr):
    """Gumbel noise in base 2, -log2(E) with E ~ Exp(1), from 32 random bits.

    The sample is decided by the smallest E, so E keeps 2^-32 resolution near 0: w in (0, 1) takes
    the high 23 bits through the exponent trick and the low 9 bits exactly below them (no int ->
    float conversion), and E = -ln(1 - w) uses its series for small w, where 1 - w would round
    those bits away. (tl.rand's [0, 1) floats would floor E at ~6e-8, coarse next to p ~ 1/V.)
    """
    high = ((random_bits >> 9) | 0x3F800000).to(tl.float32, bitcast=True) - 1.0
    low = ((random_bits & 0x1FF) | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0
    w = high + (low + 0.5) * 2.3283064365386963e-10  # + 0.5: w > 0, so E > 0
    series = w * (1.0 + w * (0.5 + w * (0.3333333333333333 + w * 0.25)))
    exponential = tl.where(w < 0.0078125, series, -0.6931471805599453 * _log2(1.0 - w, FAST_LOG2))
    return -_log2(exponential, FAST_LOG2)


@triton.jit
def _online_update(
    logits_ptr, scaled_ptr, row_offsets, cols, row_ok, vocab_size, temperature, random_bits,
    m, s, t, best, best_idx, gumbel_best, gumbel_idx,
    ROUND_BF16: tl.constexpr, FAST_LOG2: tl.constexpr,
):
    """Fold one (ROWS, QUARTER) slice of the vocabulary into the per-lane running statistics.

    m: running max, s = sum e^(y-m), t = sum (y-m) e^(y-m); entropy = log s - t / s at the end.
    Only one exp per element: whichever of the old max and the new value is smaller is the one
    that gets the factor e^(min - max), the other gets 1.
    """
    mask = row_ok[:, None] & (cols[None, :] < vocab_size)
    offsets = row_offsets[:, None] + cols[None, :]
    x = tl.load(logits_ptr + offsets, mask=mask, other=float("-inf")).to(tl.float32)
    y = tl.div_rn(x, temperature)  # IEEE division, as torch's CPU path
    if ROUND_BF16:
        y = round_to_bf16(y)  # statistics of exactly the scaled logits the caller receives
    tl.store(scaled_ptr + offsets, y.to(scaled_ptr.dtype.element_ty), mask=mask)

    take = y > best  # strict: the earliest column wins ties, as torch.argmax
    best = tl.where(take, y, best)
    best_idx = tl.where(take, cols[None, :], best_idx)

    # Gumbel-max in base 2 (which only rescales y + g by log2 e): argmax(y log2 e + g2) is a sample
    # from softmax(y).
    g = _gumbel_base2(random_bits, FAST_LOG2)
    g = y * 1.4426950408889634 + g
    take = g > gumbel_best
    gumbel_best = tl.where(take, g, gumbel_best)
    gumbel_idx = tl.where(take, cols[None, :], gumbel_idx)

    m_new = tl.maximum(m, y)
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # keeps all -inf lanes NaN-free
    shrink = tl.exp(tl.minimum(m, y) - m_ref)
    y_is_new_max = y > m
    alpha = tl.where(y_is_new_max, shrink, 1.0)  # rescales the old sums to the new max
    e = tl.where(y_is_new_max, 1.0, shrink)  # e^(y - m_new)
    t = alpha * (t + tl.where(s > 0, (m - m_ref) * s, 0.0)) + tl.where(e > 0, (y - m_ref) * e, 0.0)
    s = alpha * s + e
    return m_new, s, t, best, best_idx, gumbel_best, gumbel_idx


@triton.jit(do_not_specialize=PER_CALL_INTEGERS)
def _vocab_pass_kernel(
    logits_ptr, scaled_ptr, temperature_ptr, partial_f32_ptr, partial_i32_ptr,
    seed, n_rows, vocab_size, tiles_per_split,
    ROWS: tl.constexpr, BLOCK_V: tl.constexpr, ROUND_BF16: tl.constexpr, FAST_LOG2: tl.constexpr,
):
    """Program (row block, split): one pass over its share of the vocabulary, per-lane statistics
    reduced to one partial (m, s, t, argmax, Gumbel winner) per row and split."""
    QUARTER: tl.constexpr = BLOCK_V // 4  # one Philox call gives 4 words: one per quarter tile
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    rows64 = rows.to(tl.int64)
    row_offsets = rows64 * vocab_size
    lanes = tl.arange(0, QUARTER)
    temperature = tl.load(temperature_ptr)
    n_tiles = tl.cdiv(vocab_size, BLOCK_V)
    counters_per_row = n_tiles * QUARTER

    m = tl.full((ROWS, QUARTER), float("-inf"), tl.float32)
    s = tl.zeros((ROWS, QUARTER), tl.float32)
    t = tl.zeros((ROWS, QUARTER), tl.float32)
    best = tl.full((ROWS, QUARTER), float("-inf"), tl.float32)
    best_idx = tl.zeros((ROWS, QUARTER), tl.int32)
    gumbel_best = tl.full((ROWS, QUARTER), float("-inf"), tl.float32)
    gumbel_idx = tl.zeros((ROWS, QUARTER), tl.int32)

    first_tile = split * tiles_per_split
    last_tile = tl.minimum(first_tile + tiles_per_split, n_tiles)
    for tile in range(first_tile, last_tile):
        # The counter depends on (row, tile, lane) only, so any split or row blocking draws the
        # same noise for the same column.
        counter = rows64[:, None] * counters_per_row + (tile * QUARTER + lanes)[None, :]
        words = tl.randint4x(seed, counter)
        for q in tl.static_range(4):
            cols = tile * BLOCK_V + q * QUARTER + lanes
            m, s, t, best, best_idx, gumbel_best, gumbel_idx = _online_update(
                logits_ptr, scaled_ptr, row_offsets, cols, row_ok, vocab_size, temperature, words[q],
                m, s, t, best, best_idx, gumbel_best, gumbel_idx, ROUND_BF16, FAST_LOG2)

    # Reduce the lanes: rescale every lane to the row max, then sum.
    row_max = tl.max(m, axis=1)
    row_ref = tl.where(row_max == float("-inf"), 0.0, row_max)
    alpha = tl.exp(m - row_ref[:, None])
    s_row = tl.sum(alpha * s, axis=1)
    t_row = tl.sum(alpha * (t + tl.where(s > 0, (m - row_ref[:, None]) * s, 0.0)), axis=1)
    best_row = tl.max(best, axis=1)
    best_idx_row = tl.min(tl.where(best == best_row[:, None], best_idx, vocab_size), axis=1)
    gumbel_row = tl.max(gumbel_best, axis=1)
    gumbel_idx_row = tl.min(tl.where(gumbel_best == gumbel_row[:, None], gumbel_idx, vocab_size), axis=1)

    stride = n_splits * n_rows  # partials are (field, split, row)
    out = split * n_rows + rows
    tl.store(partial_f32_ptr + out, row_max, mask=row_ok)
    tl.store(partial_f32_ptr + stride + out, s_row, mask=row_ok)
    tl.store(partial_f32_ptr + 2 * stride + out, t_row, mask=row_ok)
    tl.store(partial_f32_ptr + 3 * stride + out, best_row, mask=row_ok)
    tl.store(partial_f32_ptr + 4 * stride + out, gumbel_row, mask=row_ok)
    tl.store(partial_i32_ptr + out, tl.minimum(best_idx_row, vocab_size - 1), mask=row_ok)
    tl.store(partial_i32_ptr + stride + out, tl.minimum(gumbel_idx_row, vocab_size - 1), mask=row_ok)


@triton.jit
def _merge_splits_kernel(
    partial_f32_ptr, partial_i32_ptr, entropy_ptr, log_normalizer_ptr, argmax_ptr, sampled_ptr, n_rows, n_splits,
    BLOCK_R: tl.constexpr,
):
    """Combine the vocabulary splits of each row, in vocabulary order, into its entropy, log-normalizer
    (log sum e^y, for the probabilities of the record's top-k), argmax and sample. Strict comparisons keep
    the earliest split on ties, as torch.argmax."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < n_rows
    stride = n_splits * n_rows
    m = tl.full((BLOCK_R,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_R,), tl.float32)
    t = tl.zeros((BLOCK_R,), tl.float32)
    best = tl.full((BLOCK_R,), float("-inf"), tl.float32)
    best_idx = tl.zeros((BLOCK_R,), tl.int32)
    gumbel_best = tl.full((BLOCK_R,), float("-inf"), tl.float32)
    gumbel_idx = tl.zeros((BLOCK_R,), tl.int32)
    for split in range(n_splits):
        at = split * n_rows + rows
        m_k = tl.load(partial_f32_ptr + at, mask=row_ok, other=float("-inf"))
        s_k = tl.load(partial_f32_ptr + stride + at, mask=row_ok, other=0.0)
        t_k = tl.load(partial_f32_ptr + 2 * stride + at, mask=row_ok, other=0.0)
        m_new = tl.maximum(m, m_k)
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        a = tl.exp(m - m_ref)
        a_k = tl.exp(m_k - m_ref)
        t = a * (t + tl.where(s > 0, (m - m_ref) * s, 0.0)) + a_k * (
            t_k + tl.where(s_k > 0, (m_k - m_ref) * s_k, 0.0))
        s = a * s + a_k * s_k
        m = m_new

        best_k = tl.load(partial_f32_ptr + 3 * stride + at, mask=row_ok, other=float("-inf"))
        take = best_k > best
        best = tl.where(take, best_k, best)
        best_idx = tl.where(take, tl.load(partial_i32_ptr + at, mask=row_ok, other=0), best_idx)
        gumbel_k = tl.load(partial_f32_ptr + 4 * stride + at, mask=row_ok, other=float("-inf"))
        take = gumbel_k > gumbel_best
        gumbel_best = tl.where(take, gumbel_k, gumbel_best)
        gumbel_idx = tl.where(take, tl.load(partial_i32_ptr + stride + at, mask=row_ok, other=0), gumbel_idx)

    log_s = tl.log(s)
    entropy = log_s - t / s  # H = log s - t / s, both terms >= 0
    tl.store(entropy_ptr + rows, entropy, mask=row_ok)
    tl.store(log_normalizer_ptr + rows, m + log_s, mask=row_ok)
    tl.store(argmax_ptr + rows, best_idx.to(tl.int64), mask=row_ok)
    tl.store(sampled_ptr + rows, gumbel_idx.to(tl.int64), mask=row_ok)


@triton.jit(do_not_specialize=PER_CALL_INTEGERS)
def _accept_renoise_kernel(
    entropy_ptr, sampled_ptr, accepted_ptr, next_canvas_ptr, seed, noise_counter_base,
    canvas_length, vocab_size, entropy_bound,
    BLOCK_I: tl.constexpr, BLOCK_J: tl.constexpr,
):
    """Program (batch row, block of positions i): entropy-bound acceptance and renoise.

    Sorting positions by entropy (stable: ties by index, as torch.sort on CPU) puts position i after
    every j with H_j < H_i or (H_j == H_i and j < i). Its cumulative sum minus itself is therefore
    the sum of those H_j; it is computed by pairwise comparison, accumulated in float64 and rounded
    once to float32, exactly what torch's CPU cumsum does (it accumulates in double), so the mask
    equals `entropy_bound_mask` for the same entropies.
    """
    batch = tl.program_id(0)
    i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < canvas_length
    row_base = batch.to(tl.int64) * canvas_length
    h_i = tl.load(entropy_ptr + row_base + i, mask=i_ok, other=float("inf"))
    before_sum = tl.zeros((BLOCK_I,), tl.float64)
    for j_start in range(0, canvas_length, BLOCK_J):
        j = j_start + tl.arange(0, BLOCK_J)
        j_ok = j < canvas_length
        h_j = tl.load(entropy_ptr + row_base + j, mask=j_ok, other=float("inf"))
        earlier = (h_j[None, :] < h_i[:, None]) | ((h_j[None, :] == h_i[:, None]) & (j[None, :] < i[:, None]))
        earlier = earlier & j_ok[None, :]  # (BLOCK_I, BLOCK_J)
        before_sum += tl.sum(tl.where(earlier, h_j[None, :].to(tl.float64), 0.0), axis=1)
    cumulative = (before_sum + h_i.to(tl.float64)).to(tl.float32)
    accepted = cumulative - h_i <= entropy_bound

    # Renoise: a uniform token for every position not accepted (report Algorithm 1, step 5),
    # from a counter range disjoint from the Gumbel noise.
    noise_bits, _, _, _ = tl.randint4x(seed, noise_counter_base + row_base + i)
    noise = noise_bits.to(tl.int64) % vocab_size
    sampled = tl.load(sampled_ptr + row_base + i, mask=i_ok, other=0)
    tl.store(accepted_ptr + row_base + i, accepted.to(tl.int8), mask=i_ok)
    tl.store(next_canvas_ptr + row_base + i, tl.where(accepted, sampled, noise), mask=i_ok)


# ---------------------------------------------------------------------------------------------
# 3. Launchers.
# ---------------------------------------------------------------------------------------------
def _rows_per_program(n_rows: int, block_v: int, device: torch.device) -> int:
    """Several rows per program when the vocabulary is small. The interpreter runs programs one
    after another with a fixed cost per op, so there wide (rows x vocab) tiles are what is fast."""
    elements = 4096 if device.type == "cuda" else 65536
    return max(1, min(triton.next_power_of_2(n_rows), elements // block_v))


def _launch_config(n_rows: int, vocab_size: int, device: torch.device) -> dict:
    """4096-wide vocabulary tiles, and enough vocabulary splits to give every SM several programs
    when B x C alone does not (B x C = 256 rows would leave a 132-SM GPU mostly idle)."""
    block_v = min(4096, max(64, triton.next_power_of_2(vocab_size)))
    rows_per_program = _rows_per_program(n_rows, block_v, device)
    n_tiles = triton.cdiv(vocab_size, block_v)
    n_splits = 1
    if device.type == "cuda":
        sm_count = torch.cuda.get_device_properties(device).multi_processor_count
        n_splits = max(1, min(n_tiles, 8 * sm_count // triton.cdiv(n_rows, rows_per_program)))
    return {"block_v": block_v, "num_splits": n_splits}


def vocab_pass(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    seed: int,
    *,
    block_v: int | None = None,
    num_splits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One read of (B, C, V) logits -> (scaled_logits, entropy, argmax, sampled, log_normalizer).

    `block_v` / `num_splits` override the launch configuration (tests use them to cover several
    tiles and splits on small shapes). The Gumbel noise of a column depends on (seed, row, column,
    block_v) only, so changing `num_splits` or the rows per program leaves `sampled` unchanged.
    """
    if logits.dim() != 3:
        raise ValueError(f"logits must be (B, C, V), got shape {tuple(logits.shape)}")
    if logits.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"logits must be float32 or bfloat16, got {logits.dtype}")
    if not logits.is_contiguous():
        raise ValueError("logits must be contiguous (the kernel walks each row as one vocabulary slice)")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**63), got {seed}")
    if isinstance(temperature, (int, float)) and temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    check_device(logits, "the Triton sampling path")
    batch_size, canvas_length, vocab_size = logits.shape
    if vocab_size >= 2**31:
        raise ValueError(f"vocabulary must be < 2**31 (int32 indices), got {vocab_size}")
    n_rows = batch_size * canvas_length
    temperature = torch.as_tensor(temperature, dtype=torch.float32, device=logits.device).reshape(-1)
    if temperature.numel() != 1:
        raise ValueError(f"temperature must be a scalar, got shape {tuple(temperature.shape)}")

    config = _launch_config(n_rows, vocab_size, logits.device)
    block_v = block_v or config["block_v"]
    if block_v < 64 or block_v & (block_v - 1):
        raise ValueError(f"block_v must be a power of two >= 64, got {block_v}")
    rows_per_program = _rows_per_program(n_rows, block_v, logits.device)
    n_tiles = triton.cdiv(vocab_size, block_v)
    tiles_per_split = triton.cdiv(n_tiles, min(num_splits or config["num_splits"], n_tiles))
    n_splits = triton.cdiv(n_tiles, tiles_per_split)

    scaled = torch.empty_like(logits)
    partial_f32 = torch.empty((5, n_splits, n_rows), dtype=torch.float32, device=logits.device)
    partial_i32 = torch.empty((2, n_splits, n_rows), dtype=torch.int32, device=logits.device)
    grid = (triton.cdiv(n_rows, rows_per_program), n_splits)
    entropy = torch.empty((batch_size, canvas_length), dtype=torch.float32, device=logits.device)
    argmax = torch.empty((batch_size, canvas_length), dtype=torch.int64, device=logits.device)
    sampled = torch.empty_like(argmax)
    log_normalizer = torch.empty_like(entropy)
    block_r = min(1024, triton.next_power_of_2(n_rows))
    with device_guard(logits.device):
        _vocab_pass_kernel[grid](
            logits, scaled, temperature, partial_f32, partial_i32, seed, n_rows, vocab_size,
            tiles_per_split, ROWS=rows_per_program, BLOCK_V=block_v, ROUND_BF16=logits.dtype == torch.bfloat16,
            FAST_LOG2=logits.is_cuda, num_warps=8 if block_v >= 2048 else 4,
        )
        _merge_splits_kernel[(triton.cdiv(n_rows, block_r),)](
            partial_f32, partial_i32, entropy, log_normalizer, argmax, sampled, n_rows, n_splits, BLOCK_R=block_r
        )
    return scaled, entropy, argmax, sampled, log_normalizer


def accept_and_renoise(
    entropy: torch.Tensor,
    sampled: torch.Tensor,
    entropy_bound: float,
    vocab_size: int,
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, C) float32 entropies and samples -> (accepted mask, next canvas)."""
    if entropy.dim() != 2 or entropy.shape != sampled.shape:
        raise ValueError(f"entropy and sampled must both be (B, C), got {tuple(entropy.shape)} and {tuple(sampled.shape)}")
    if entropy.dtype != torch.float32 or sampled.dtype != torch.int64:
        raise TypeError(f"entropy must be float32 and sampled int64, got {entropy.dtype} and {sampled.dtype}")
    if not (entropy.is_contiguous() and sampled.is_contiguous()):
        raise ValueError("entropy and sampled must be contiguous")
    if entropy.device != sampled.device:
        raise ValueError(f"entropy and sampled must be on one device, got {entropy.device} and {sampled.device}")
    if entropy_bound < 0:
        raise ValueError(f"entropy_bound must be >= 0, got {entropy_bound}")
    check_device(entropy, "the Triton sampling path")
    batch_size, canvas_length = entropy.shape
    accepted = torch.empty((batch_size, canvas_length), dtype=torch.uint8, device=entropy.device)
    next_canvas = torch.empty_like(sampled)
    block = min(64, triton.next_power_of_2(canvas_length))  # (64, 64) comparisons per inner step
    with device_guard(entropy.device):
        _accept_renoise_kernel[(batch_size, triton.cdiv(canvas_length, block))](
            entropy, sampled, accepted, next_canvas, seed, NOISE_COUNTER_BASE, canvas_length,
            vocab_size, float(entropy_bound), BLOCK_I=block, BLOCK_J=block,
        )
    return accepted.view(torch.bool), next_canvas


# ---------------------------------------------------------------------------------------------
# 4. The sampling step.
# ---------------------------------------------------------------------------------------------
def draw_seed() -> int:
    """A Philox seed from torch's default generator, so `torch.manual_seed` fixes the run."""
    return int(torch.randint(0, 2**31 - 1, (1,)).item())


def sample_step_triton(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    current_canvas: torch.Tensor,
    entropy_bound: float,
    *,
    seed: int | None = None,
) -> StepSample:
    """Fused equivalent of `sample_step_torch`: same outputs, its own counter-based RNG.

    `scaled_logits` is written by the vocabulary kernel in the same pass that reads the logits
    (logits / τ, IEEE division, rounded to the logits' dtype); the entropy, argmax and sample are
    computed from exactly those rounded values, so argmax equals torch.argmax of `scaled_logits`
    (first index on ties) and entropy is within ~1e-5 of its exact value (float32 accumulation,
    returned as float32 whatever the logits' dtype).
    Like the torch path, every non-accepted position is renoised, so `current_canvas` only fixes
    the expected (B, C) shape.
    """
    if current_canvas.shape != logits.shape[:2]:
        raise ValueError(
            f"current_canvas must be (B, C) = {tuple(logits.shape[:2])}, got {tuple(current_canvas.shape)}"
        )
    seed = draw_seed() if seed is None else int(seed)
    scaled, entropy, argmax, sampled, log_normalizer = vocab_pass(logits, temperature, seed)
    accepted, next_canvas = accept_and_renoise(entropy, sampled, entropy_bound, logits.shape[-1], seed)
    return StepSample(scaled, entropy, argmax, sampled, accepted, next_canvas, log_normalizer=log_normalizer)
