"""
The text_classification_py pipeline's first step, Triton's Python backend form of the JavaScript
`tokenizer` (tokenizer/1/model.mjs and wordpiece.mjs), written by hand with numpy and the standard
library only: text BYTES [n, 1] (UTF-8 strings) -> input_ids and attention_mask INT64
[n, max_sequence_length], BERT's WordPiece over vocab.txt beside this file. max_sequence_length
is a parameter of config.pbtxt (default 16). It gives the JavaScript tokenizer's ids for every
text, which test/example-pipelines.test.ts checks through both ensembles.

Basic step: drop NUL, U+FFFD and control characters, turn whitespace into spaces, put spaces
around CJK ideographs, lowercase and strip accents, split on whitespace and on every punctuation
character. WordPiece step: each word becomes the longest vocabulary entries that match from its
start, continuations prefixed with `##`; a word that cannot be covered (or is longer than 100
characters) becomes `[UNK]` as a whole. Characters are classified by Python's unicodedata, the
JavaScript model by its runtime's ICU: the two agree on every character both Unicode versions
assign.
"""
import json
import os
import unicodedata

import numpy as np
import triton_python_backend_utils as pb_utils

PAD = "[PAD]"
UNK = "[UNK]"
CLS = "[CLS]"
SEP = "[SEP]"
MAX_CHARS_PER_WORD = 100


def parse_vocabulary(text):
    """vocab.txt: one token per line, its id the line number from 0 (the first of duplicates wins)."""
    vocabulary = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for token_id, line in enumerate(lines):
        token = line[:-1] if line.endswith("\r") else line
        vocabulary.setdefault(token, token_id)
    for special in (PAD, UNK, CLS, SEP):
        if special not in vocabulary:
            raise ValueError("vocabulary has no " + special + " token")
    return vocabulary


def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    """BERT counts every non-alphanumeric ASCII character as punctuation, and Unicode's P categories."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def basic_tokenize(text):
    """The basic step: words and punctuation marks, lowercased and without accents."""
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        if is_whitespace(ch):
            cleaned.append(" ")
        elif is_cjk(cp):
            cleaned.append(" " + ch + " ")
        else:
            cleaned.append(ch)
    words = []
    for token in "".join(cleaned).split(" "):
        if token == "":
            continue
        decomposed = unicodedata.normalize("NFD", token.lower())
        plain = "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
        word = ""
        for ch in plain:
            if is_punctuation(ch):
                if word != "":
                    words.append(word)
                words.append(ch)
                word = ""
            else:
                word += ch
        if word != "":
            words.append(word)
    return words


def word_pieces(word, vocabulary):
    """Greedy longest-match-first split of one word into vocabulary entries."""
    if len(word) > MAX_CHARS_PER_WORD:
        return [UNK]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while end > start:
            candidate = ("##" if start > 0 else "") + word[start:end]
            if candidate in vocabulary:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [UNK]
        pieces.append(piece)
        start = end
    return pieces


def tokenize(text, vocabulary):
    return [piece for word in basic_tokenize(text) for piece in word_pieces(word, vocabulary)]


def encode(text, vocabulary, max_length):
    """`[CLS] tokens [SEP]`, the tokens cut so that the whole fits max_length, then `[PAD]` up to
    max_length; the mask is 1 over the real tokens (the markers included) and 0 over the padding."""
    tokens = [CLS] + tokenize(text, vocabulary)[: max_length - 2] + [SEP]
    ids = [vocabulary.get(token, vocabulary[UNK]) for token in tokens]
    mask = [1] * len(ids)
    padding = max_length - len(ids)
    return ids + [vocabulary[PAD]] * padding, mask + [0] * padding


def decoded(element):
    """A BYTES element (numpy gives bytes) as text; bytes that are not UTF-8 become U+FFFD, which is dropped."""
    if isinstance(element, str):
        return element
    return bytes(element).decode("utf-8", errors="replace")


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        text = config.get("parameters", {}).get("max_sequence_length", {}).get("string_value", "16")
        try:
            length = float(text)
        except ValueError:
            length = float("nan")
        if not length.is_integer() or length < 2:
            raise pb_utils.TritonModelException(
                "parameter max_sequence_length must be an integer of at least 2, got '" + text + "'"
            )
        self.max_length = int(length)
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(version_dir, "vocab.txt"), encoding="utf-8", errors="replace", newline="") as f:
            self.vocabulary = parse_vocabulary(f.read())

    def execute(self, requests):
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "text").as_numpy()
            rows = [decoded(element) for element in texts.reshape(-1)]
            ids = np.zeros((len(rows), self.max_length), dtype=np.int64)
            mask = np.zeros((len(rows), self.max_length), dtype=np.int64)
            for row, text in enumerate(rows):
                ids[row], mask[row] = encode(text, self.vocabulary, self.max_length)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("input_ids", ids), pb_utils.Tensor("attention_mask", mask)])
            )
        return responses
