#!/usr/bin/python3
"""Turn text files into a token file for the gpt example.

A character-level tokenizer with the example's 64-token vocabulary: the
lowercase letters, digits, space, newline and the common punctuation each
get a token; upper case folds to lower case; every other character is token
63. The files are read in the order given, one after the other. Tokens are
written as little-endian uint16, the layout nanoGPT's train.bin uses and
the training binary's --tokens reads.

  make_corpus.py README.md docs/*.md corpus.bin
"""

import sys

import numpy as np

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 \n.,;:'\"()-_/`*#|<>=+[]{}!?"
UNKNOWN = 63
assert len(ALPHABET) <= UNKNOWN


def tokenize(text):
    index = {c: i for i, c in enumerate(ALPHABET)}
    return np.array([index.get(c, UNKNOWN) for c in text.lower()],
                    dtype="<u2")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: make_corpus.py TEXT_FILE... OUT.bin")
    *texts, out = sys.argv[1:]
    chunks = []
    for path in texts:
        with open(path, encoding="utf-8") as f:
            chunks.append(f.read())
    tokens = tokenize("".join(chunks))
    tokens.tofile(out)
    print(f"{out}: {tokens.size} tokens from {len(texts)} files")


if __name__ == "__main__":
    main()
