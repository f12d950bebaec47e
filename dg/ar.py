"""AR mode: the same DiffusionGemma weights decoding one token per forward (report §5.3).

The causal encoder pass writes each token into the KV cache; its last hidden state is already
final-normed, so next-token logits are softcap(lm_head(h)). Greedy or sampled, streamed per token, through
the run's passes on its path (dg.paths): eager on a growing cache, or compiled on a pooled static cache
(as `generate(cache_implementation="static")`), or graphed.

Where the model lives chooses the path (`dg.paths.choose_path`, overridden by `--path`). The compiled step
is compiled and warmed when the model loads (`warm_ar_path`) so no run pays it. Measured on the embedded
model, one thread of this 2-core CPU (`python -m dg.bench.ar_paths`): the compiled step is 1.42x eager's
tokens/s (187 vs 132) with the same tokens, but compiling costs 33-70 s at every load (each test, each
worker start), so there it is the `--path compiled` choice, not the default.

    python -m dg generate --mode ar --prompt "What is 2487 + 3356?"
"""

import threading
from collections.abc import Iterator

import torch

from dg.config import SamplerConfig
from dg.passes import eos_token_ids as model_eos_ids
from dg.passes import pad_token_id, split_inputs, token_record
from dg.paths import Run, open_passes
from dg.trace import RunEnd, RunStart, Trace

WARM_UP_TOKENS = 4  # a run this long compiles the step, records its CUDA graph and replays it once


def warm_ar_path(model, path: str) -> None:
    """Compile the AR step of the compiled path now (a short run on a few pad tokens), so the first real run
    does not wait for it; the other paths need nothing."""
    if path != "compiled":
        return
    pad = model.config.get_text_config().pad_token_id or 0
    prompt = torch.full((1, WARM_UP_TOKENS), pad, dtype=torch.long, device=model.device)
    generate_ar(model, {"input_ids": prompt}, SamplerConfig(max_new_tokens=WARM_UP_TOKENS), path=path)


def next_token_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """softcap(lm_head(h)) in float32, exactly as the decoder head does it."""
    cap = model.config.text_config.final_logit_softcapping
    logits = model.lm_head(hidden).to(torch.float32)
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return logits


def pick(logits: torch.Tensor, greedy: bool, temperature: float) -> torch.Tensor:
    if greedy:
        return torch.argmax(logits, dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(-1)


@torch.no_grad()
def stream_ar(model, inputs: dict, config: SamplerConfig | None = None, *, cancel: threading.Event | None = None,
              draft=None, path: str = "eager", greedy: bool = True, temperature: float = 1.0,
              eos_token_ids: list[int] | None = None) -> Iterator:
    """Yield RunStart, a TokenRecord per generated token (EOS included), then RunEnd.

    Up to `config.max_new_tokens` tokens (the only knob AR reads); greedy, or sampled at `temperature`. The EOS
    ids are the model's unless given (a plain causal LM's tokenizer may name its own). A draft seeds a diffusion
    canvas and has no meaning here. Setting `cancel` stops the run before the next token's pass.
    """
    if draft is not None:
        raise ValueError("a draft seeds the diffusion canvas; it does not apply to AR")
    config = config or SamplerConfig.from_generation_config(model.generation_config)
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    input_ids, extra = split_inputs(inputs)
    eos = sorted({int(e) for e in (model_eos_ids(model) if eos_token_ids is None else eos_token_ids)})
    budget = config.max_new_tokens
    with open_passes(model, path, input_ids.shape[1] + budget) as passes:
        run = Run(model, passes, cancel)
        yield RunStart("ar", input_ids.shape[1], 1, model.config.text_config.vocab_size, budget,
                       {"greedy": greedy, "temperature": temperature}, eos, pad_token_id(model))
        finish, token = "max_new_tokens", None
        for index in range(budget):
            if run.cancelled:
                finish = "cancelled"
                break
            forwards = run.forwards
            hidden = run.prefill(input_ids, extra) if index == 0 else run.encode(token.view(1, 1))
            logits = next_token_logits(model, hidden[:, -1])  # (1, V)
            token = pick(logits, greedy, temperature)
            yield token_record(index, int(token), logits[0], run.elapsed(), forwards)
            if int(token) in eos:
                finish = "eos"
                break
        yield RunEnd(finish, *run.forwards, run.elapsed())


def generate_ar(model, inputs: dict, config: SamplerConfig | None = None, **kwargs) -> Trace:
    """Run AR decoding to the end and return the whole trace."""
    return Trace.collect(stream_ar(model, inputs, config, **kwargs))
