#!/usr/bin/env python3
"""Rewrites a CUDA source of runtime/lib/cuda into C++ for the CPU emulation
(FakeCuda.h): the two constructs that are not C++.

  kernel<<<grid, block, shared, stream>>>(args)
      -> fake::Launch(grid, block, shared, stream)
             .run(<kernel's address, or null for a template deduced from
                   the arguments>, [&] { kernel(args); })
  extern __shared__ T name[];
      -> T *name = reinterpret_cast<T *>(fake::dynSmem);

  emulate_cuda_source.py IN OUT
"""

import re
import sys


def kernel_start(text, end):
    """Where the kernel expression that ends at `end` starts: identifiers,
    '::' and template argument lists, walked backwards."""
    j = end
    while j > 0:
        c = text[j - 1]
        if c.isalnum() or c in "_:":
            j -= 1
        elif c == ">":
            depth, k = 0, j - 1
            while True:
                if text[k] == ">":
                    depth += 1
                elif text[k] == "<":
                    depth -= 1
                if depth == 0:
                    break
                k -= 1
            j = k
        else:
            break
    return j


def matching_paren(text, open_at):
    """The index of the ')' that closes the '(' at open_at."""
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    sys.exit("emulate_cuda_source.py: unbalanced parentheses in a launch")


# The kernel's address where the name resolves to one function (a pointer,
# a function, an explicit specialization); null where CUDA deduces the
# template arguments from the call, which only a call can do. The emulator
# keys dynamic shared memory limits (cudaFuncSetAttribute) by it.
KEY = ("[&](auto dep) -> const void * {{ if constexpr (requires {{ "
       "fake::address({k}, dep); }}) return fake::address({k}, dep); "
       "else return nullptr; }}(0)")


def rewrite_launches(text):
    out = text
    while True:
        i = out.find("<<<")
        if i < 0:
            return out
        end = i
        while end > 0 and out[end - 1].isspace():
            end -= 1
        start = kernel_start(out, end)
        kernel = out[start:end]
        close = out.find(">>>", i)
        config = out[i + 3:close]
        p = close + 3
        while out[p].isspace():
            p += 1
        if not kernel or out[p] != "(":
            sys.exit(f"emulate_cuda_source.py: cannot parse the launch near "
                     f"{out[start:p + 20]!r}")
        q = matching_paren(out, p)
        args = out[p + 1:q]
        call = (f"fake::Launch({config}).run({KEY.format(k=kernel)}, "
                f"[&] {{ {kernel}({args}); }})")
        out = out[:start] + call + out[q + 1:]


def rewrite(text):
    text = re.sub(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+(\w+)\[\];",
                  r"\1 *\2 = reinterpret_cast<\1 *>(fake::dynSmem);", text)
    return rewrite_launches(text)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        text = f.read()
    with open(sys.argv[2], "w") as f:
        f.write(f"// Rewritten from {sys.argv[1]} by emulate_cuda_source.py.\n")
        f.write(rewrite(text))


if __name__ == "__main__":
    main()
