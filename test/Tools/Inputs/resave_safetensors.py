#!/usr/bin/python3
"""Writes some tensors of a safetensors file into a new one without its
__metadata__ (a plain file, as safetensors.torch.save_file writes one).

  resave_safetensors.py IN.safetensors NAME[,NAME...] OUT.safetensors
"""
import json
import struct
import sys

src, names, out = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
with open(src, "rb") as f:
    blob = f.read()
n = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
new, chunks, at = {}, [], 0
for name in names:
    begin, end = header[name]["data_offsets"]
    new[name] = {"dtype": header[name]["dtype"], "shape": header[name]["shape"],
                 "data_offsets": [at, at + end - begin]}
    chunks.append(data[begin:end])
    at += end - begin
text = json.dumps(new).encode()
text += b" " * (-len(text) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
