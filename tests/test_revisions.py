"""Self-correction found in a trace: tokens accepted at one step and changed before their canvas is committed."""

import numpy as np

from dg.revisions import best_revision, find_revisions, first_with_revision
from dg.trace import CanvasRecord, RunEnd, RunStart, StepRecord, Trace


def step(n, noisy, argmax, sampled, accepted, canvas=0):
    c = len(noisy)
    return StepRecord(canvas=canvas, step=n, temperature=0.8, noisy=np.array(noisy), argmax=np.array(argmax),
                      sampled=np.array(sampled), accepted=np.array(accepted, dtype=bool),
                      entropy=np.zeros(c, np.float32), accepted_entropy=0.0, entropy_bound=0.1, mean_entropy=0.0,
                      stable=False, confident=False, stop_reason=None, topk_ids=np.zeros((c, 1), np.int64),
                      topk_probs=np.ones((c, 1), np.float32), t=0.01 * n)


def trace_of(steps, committed, canvas=0):
    trace = Trace()
    trace.add(RunStart("diffusion", 3, len(committed), 50, len(committed), {}, [1], 0))
    for s in steps:
        trace.add(s)
    trace.add(CanvasRecord(canvas, len(steps), "stable_confident", np.array(committed), len(committed), False, 1.0))
    trace.add(RunEnd("max_new_tokens", 1, len(steps), 1.0))
    return trace


def test_a_token_accepted_then_renoised_and_committed_differently_is_one_revision():
    # step 1 accepts 7 at position 0; step 2 does not accept it (renoised to 30); step 3 holds 30, argmax 9
    steps = [step(1, [20, 21], [7, 5], [7, 4], [True, False]),
             step(2, [7, 22], [9, 5], [9, 5], [False, True]),
             step(3, [30, 5], [9, 5], [9, 5], [True, True])]
    found = find_revisions(trace_of(steps, [9, 5]))
    assert [(r.position, r.accepted_step, r.revised_step, r.how, r.accepted_token, r.new_token, r.committed_token)
            for r in found] == [(0, 1, 3, "renoised", 7, 30, 9)]
    assert not found[0].kept_in_the_end


def test_an_accepted_token_replaced_by_a_new_accepted_sample_is_resampled():
    steps = [step(1, [20, 21], [7, 5], [7, 5], [True, True]),
             step(2, [7, 5], [8, 5], [8, 5], [True, True]),
             step(3, [8, 5], [8, 5], [8, 5], [True, True])]
    found = find_revisions(trace_of(steps, [8, 5]))
    assert [(r.position, r.how, r.revised_step) for r in found] == [(0, "resampled", 3)]


def test_a_sample_accepted_at_the_last_steps_but_not_the_argmax_is_an_argmax_revision():
    steps = [step(1, [20], [7], [6], [True]), step(2, [6], [7], [6], [True])]
    found = find_revisions(trace_of(steps, [7]))
    assert [(r.accepted_step, r.how, r.committed_token) for r in found] == [(1, "argmax", 7), (2, "argmax", 7)]


def test_tokens_kept_from_acceptance_to_commit_are_no_revision():
    steps = [step(1, [20, 21], [7, 5], [7, 4], [True, False]),
             step(2, [7, 22], [7, 5], [7, 5], [True, True]),
             step(3, [7, 5], [7, 5], [7, 5], [True, True])]
    assert find_revisions(trace_of(steps, [7, 5])) == []
    assert best_revision([]) is None


def test_the_best_revision_is_one_that_changed_the_committed_token():
    steps = [step(1, [20, 21], [7, 5], [7, 5], [True, True]),
             step(2, [7, 5], [7, 6], [7, 6], [False, True]),  # 7 renoised (back at commit), 5 resampled to 6
             step(3, [40, 6], [7, 6], [7, 6], [True, True])]
    found = find_revisions(trace_of(steps, [7, 6]))
    assert {r.position for r in found} == {0, 1}
    assert best_revision(found).position == 1  # committed 6, not the accepted 5


def test_a_change_of_the_canvas_is_shown_before_a_change_of_the_final_argmax_only():
    steps = [step(1, [20, 21], [7, 5], [6, 4], [True, True]),  # 6 accepted, argmax 7: argmax-only revision
             step(2, [6, 4], [7, 5], [6, 5], [True, True]),  # 4 resampled to 5
             step(3, [6, 5], [7, 5], [6, 5], [True, True])]
    found = find_revisions(trace_of(steps, [7, 5]))
    assert {r.how for r in found} == {"argmax", "resampled"}
    assert best_revision(found).how == "resampled"


def check_points_at_the_records(diffusion_trace, revisions):
    assert revisions
    for r in revisions:
        steps = diffusion_trace.steps_of(r.canvas)
        accepted = steps[r.accepted_step - 1]
        assert accepted.accepted[r.position] and accepted.sampled[r.position] == r.accepted_token
        assert r.revised_step > r.accepted_step
        committed = diffusion_trace.canvases[r.canvas].committed[r.position]
        assert r.committed_token == committed


def test_the_search_stops_at_the_first_run_with_a_revision_and_makes_no_run_after_it():
    clean = trace_of([step(1, [20], [7], [7], [True]), step(2, [7], [7], [7], [True])], [7])
    revised = trace_of([step(1, [20], [7], [6], [True]), step(2, [6], [7], [6], [True])], [7])
    made = []

    def runs():
        for label, trace in (("a", clean), ("b", revised), ("c", revised)):
            made.append(label)
            yield label, trace

    label, trace, found, tried = first_with_revision(runs(), limit=5)
    assert (label, tried, made) == ("b", 2, ["a", "b"]) and found == find_revisions(revised)
    assert first_with_revision(iter([("a", clean)] * 3), limit=2) is None


def embedded_revised_run():
    """(the embedded model, the first revision the Learn tab's bounded search finds: the shipped examples
    without an image at seeds 0-2), shared with the view's tests."""
    import torch

    from dg.loading import load
    from dg.prompts import build_inputs
    from dg.sampler import generate_diffusion
    from dg.examples import load_rows

    loaded = load()
    rows = [r for r in load_rows()["tiny"] if r.image is None]

    def runs():
        for seed in range(3):
            for row in rows:
                torch.manual_seed(seed)
                inputs = build_inputs(loaded.processor, row.prompt, thinking=row.thinking)
                yield row.prompt, generate_diffusion(loaded.model, inputs, loaded.sampler_config)

    return loaded, first_with_revision(runs(), limit=3 * len(rows))


def test_the_embedded_model_revises_an_accepted_token_within_a_bounded_search_of_its_examples():
    """The shipped examples and a few seeds hold a real self-correction (the Learn tab's search)."""
    _, found = embedded_revised_run()
    assert found is not None
    _, trace, revisions, _ = found
    check_points_at_the_records(trace, revisions)
