#!/usr/bin/python3
"""Turn a text file into a token file for the gpt example.

A character-level tokenizer with the example's 64-token vocabulary: the
lowercase letters, digits, space, newline and the common punctuation each
get a token; upper case folds to lower case; every other character is token
63. Tokens are written as little-endian uint16, the layout nanoGPT's
train.bin uses and the training binary's --tokens reads.

  make_corpus.py README.md corpus.bin
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
    if len(sys.argv) != 3:
        sys.exit("usage: make_corpus.py TEXT_FILE OUT.bin")
    with open(sys.argv[1], encoding="utf-8") as f:
        tokens = tokenize(f.read())
    tokens.tofile(sys.argv[2])
    print(f"{sys.argv[2]}: {tokens.size} tokens")


if __name__ == "__main__":
    main()
