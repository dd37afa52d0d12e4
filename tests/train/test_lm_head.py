"""The plain LM head SFT and GRPO use on CPU: what TRL's fused head returns, on the same batch, to the last
gradient.

Two oracles: TRL 1.16's own chunked head (`add_fused_lm_head`) on an identical copy of the model, and
the definitions computed in float64 from the model's full logits (log-softmax at the label, entropy
of the next-token distribution, whether the label is the arg max).
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from trl.trainer.utils import add_fused_lm_head

from thinc_bench.train.lm_head import choose_lm_head, plain_head_applies, use_plain_lm_head

TRL_OUTPUTS = ("log_probs", "entropy", "is_top1")
"""What SFTTrainer asks TRL's head for."""


def _model(tied: bool, **extra: object) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=tied,
        pad_token_id=0,
        **extra,
    )
    torch.manual_seed(1)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # peaked enough that top-1 is decided and entropy far from log(vocab)
        model.get_output_embeddings().weight.mul_(8.0)
    return model


def _batch() -> dict[str, torch.Tensor]:
    """Two rows, the second left-padded; labels -100 on each prompt, on padding and on one 'interpreter' run."""
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(1, 300, (2, 12), generator=generator)
    ids[1, :3] = 0
    attention = torch.ones_like(ids)
    attention[1, :3] = 0
    labels = ids.clone()
    labels[0, :4] = -100  # prompt
    labels[0, 7:9] = -100  # interpreter output inside the completion
    labels[1, :6] = -100  # padding and prompt
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def _pair(tied: bool) -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    model = _model(tied)
    trl_model, plain = copy.deepcopy(model), copy.deepcopy(model)
    add_fused_lm_head(trl_model, outputs=TRL_OUTPUTS)
    add_fused_lm_head(plain, outputs=TRL_OUTPUTS)
    use_plain_lm_head(plain)
    return trl_model, plain


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("num_items", [None, 9])
def test_the_plain_head_returns_trls_outputs_loss_and_gradients(tied: bool, num_items: int | None) -> None:
    trl_model, plain = _pair(tied)
    batch = _batch()
    extra = {} if num_items is None else {"num_items_in_batch": num_items}
    want = trl_model(**batch, fused_lm_head=True, use_cache=False, **extra)
    got = plain(**batch, fused_lm_head=True, use_cache=False, **extra)

    assert torch.equal(got.label_mask, want.label_mask)
    assert int(got.label_mask.sum()) == 12  # 6 + 6 scored next-token labels of 22 positions
    torch.testing.assert_close(got.log_probs, want.log_probs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.entropy, want.entropy, rtol=1e-5, atol=1e-5)
    assert torch.equal(got.is_top1.bool(), want.is_top1.bool())
    torch.testing.assert_close(got.loss, want.loss, rtol=1e-6, atol=1e-6)

    got.loss.backward()
    want.loss.backward()
    grads = dict(trl_model.named_parameters())
    for name, parameter in plain.named_parameters():
        torch.testing.assert_close(parameter.grad, grads[name].grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_plain_head_matches_the_definitions_in_float64() -> None:
    _, plain = _pair(tied=False)
    batch = _batch()
    with torch.no_grad():
        logits = plain(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    for row, t in ((0, 4), (0, 9), (1, 7)):  # some labels are the model's top choice
        batch["labels"][row, t + 1] = logits[row, t].argmax()
    got = plain(**batch, fused_lm_head=True, use_cache=False)
    logits, labels = logits[:, :-1].double(), batch["labels"][:, 1:]
    log_p = torch.log_softmax(logits, dim=-1)
    scored = 0
    for row in range(2):
        for t in range(labels.shape[1]):
            label = int(labels[row, t])
            if label == -100:
                assert got.log_probs[row, t] == 0 and got.entropy[row, t] == 0 and got.is_top1[row, t] == 0
                continue
            scored += 1
            assert float(got.log_probs[row, t].detach()) == pytest.approx(
                float(log_p[row, t, label]), abs=1e-4
            )
            entropy = float(-(log_p[row, t].exp() * log_p[row, t]).sum())
            assert float(got.entropy[row, t]) == pytest.approx(entropy, abs=1e-4)
            assert bool(got.is_top1[row, t]) == (int(logits[row, t].argmax()) == label)
    assert scored == 12
    mean_nll = -sum(
        float(log_p[r, t, int(labels[r, t])]) for r in range(2) for t in range(11) if labels[r, t] >= 0
    )
    assert float(got.loss.detach()) == pytest.approx(mean_nll / scored, abs=1e-4)
    assert float(got.is_top1.sum()) == 3  # the check above saw both outcomes


GRPO_OUTPUTS = ("log_probs", "entropy")
"""What GRPOTrainer asks TRL's head for (with its sampling temperature)."""


@pytest.mark.parametrize("entropy_bonus", [0.0, 0.05])
def test_under_grpos_temperature_the_plain_head_returns_trls_log_probs_entropy_and_gradients(
    entropy_bonus: float,
) -> None:
    model = _model(tied=True)
    trl_model, plain = copy.deepcopy(model), copy.deepcopy(model)
    add_fused_lm_head(trl_model, temperature=0.7, outputs=GRPO_OUTPUTS)
    add_fused_lm_head(plain, temperature=0.7, outputs=GRPO_OUTPUTS)
    use_plain_lm_head(plain, temperature=0.7, entropy_grad=entropy_bonus != 0.0)
    batch = _batch()
    advantages = torch.tensor([[1.5], [-0.5]])  # GRPO's policy term, per row, plus the optional bonus
    losses = []
    for m in (trl_model, plain):
        out = m(**batch, fused_lm_head=True, use_cache=False)
        mask = out.label_mask.float()
        loss = -(out.log_probs * advantages * mask).sum() / mask.sum()
        loss = loss - entropy_bonus * (out.entropy * mask).sum() / mask.sum()
        loss.backward()
        losses.append((out, loss))
    (want, want_loss), (got, got_loss) = losses
    torch.testing.assert_close(got.log_probs, want.log_probs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.entropy, want.entropy, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-6, atol=1e-6)
    assert got.entropy.requires_grad == (entropy_bonus != 0.0)
    grads = dict(trl_model.named_parameters())
    for name, parameter in plain.named_parameters():
        torch.testing.assert_close(parameter.grad, grads[name].grad, rtol=1e-4, atol=1e-6, msg=name)


def test_temperature_scales_the_distribution_the_plain_head_scores() -> None:
    model = _model(tied=False)
    batch = _batch()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    add_fused_lm_head(model, temperature=2.0, outputs=GRPO_OUTPUTS)
    use_plain_lm_head(model, temperature=2.0)
    with torch.no_grad():
        got = model(**batch, fused_lm_head=True, use_cache=False)
    log_p = torch.log_softmax(logits[:, :-1].double() / 2.0, dim=-1)
    row, t = 0, 5  # a scored position (label at index 6)
    label = int(batch["labels"][row, t + 1])
    assert float(got.log_probs[row, t]) == pytest.approx(float(log_p[row, t, label]), abs=1e-5)
    entropy = float(-(log_p[row, t].exp() * log_p[row, t]).sum())
    assert float(got.entropy[row, t]) == pytest.approx(entropy, abs=1e-5)
    # at temperature 2 the distribution is flatter than at 1: higher entropy than the unscaled one
    plain_log_p = torch.log_softmax(logits[row, t].double(), dim=-1)
    assert entropy > float(-(plain_log_p.exp() * plain_log_p).sum())


def test_the_fp32_cast_projects_in_float32_under_bf16_autocast_as_trls_head_does() -> None:
    model = _model(tied=False)
    trl_model, plain = copy.deepcopy(model), copy.deepcopy(model)
    add_fused_lm_head(trl_model, cast_lm_head_to_fp32=True, outputs=GRPO_OUTPUTS)
    add_fused_lm_head(plain, cast_lm_head_to_fp32=True, outputs=GRPO_OUTPUTS)
    use_plain_lm_head(plain, cast_to_fp32=True)
    batch = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = trl_model(**batch, fused_lm_head=True, use_cache=False)
        got = plain(**batch, fused_lm_head=True, use_cache=False)
    assert got.log_probs.dtype == torch.float32
    # the same bf16 backbone on both sides; the heads differ only in float32 summation order
    torch.testing.assert_close(got.log_probs, want.log_probs, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.entropy, want.entropy, rtol=1e-4, atol=1e-4)


def test_other_calls_still_reach_the_model_unchanged() -> None:
    model = _model(tied=False)
    plain = copy.deepcopy(model)
    add_fused_lm_head(plain, outputs=TRL_OUTPUTS)
    use_plain_lm_head(plain)
    batch = _batch()
    want, got = model(**batch), plain(**batch)
    torch.testing.assert_close(got.logits, want.logits)
    torch.testing.assert_close(got.loss, want.loss)


def test_it_refuses_models_it_would_score_differently() -> None:
    bare = _model(tied=False)
    assert plain_head_applies(bare) == "TRL's fused head is not on it"
    capped = _model(tied=False, final_logit_softcapping=30.0)
    add_fused_lm_head(capped, outputs=TRL_OUTPUTS)
    assert plain_head_applies(capped) == "its logits are scaled or capped after the projection"
    with pytest.raises(ValueError, match="scaled or capped"):
        use_plain_lm_head(capped)
    patched = _model(tied=False)
    add_fused_lm_head(patched, outputs=TRL_OUTPUTS)
    assert plain_head_applies(patched) is None
    use_plain_lm_head(patched)
    assert plain_head_applies(patched) == "TRL's fused head is not on it"  # never applied twice


def test_auto_picks_the_plain_head_on_cpu_only_and_says_why() -> None:
    patched = _model(tied=False)
    add_fused_lm_head(patched, outputs=TRL_OUTPUTS)
    assert choose_lm_head("auto", "cpu", patched).startswith("plain (auto: on CPU")
    assert choose_lm_head("auto", "cuda", patched).startswith("trl (auto: on cuda")
    assert choose_lm_head("trl", "cpu", patched) == "trl (requested)"
    assert choose_lm_head("plain", "cuda", patched) == "plain (requested)"
    capped = _model(tied=False, final_logit_softcapping=30.0)
    add_fused_lm_head(capped, outputs=TRL_OUTPUTS)
    assert (
        choose_lm_head("auto", "cpu", capped)
        == "trl (auto: its logits are scaled or capped after the projection)"
    )
    with pytest.raises(SystemExit, match="--lm_head plain: its logits are scaled.*use --lm_head trl"):
        choose_lm_head("plain", "cpu", capped)
    with pytest.raises(SystemExit, match="--lm_head 'fused': choose one of auto, plain, trl"):
        choose_lm_head("fused", "cpu", patched)
