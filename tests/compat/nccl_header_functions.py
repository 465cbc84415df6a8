"""Lists the API functions an nccl.h declares (shared by the compat test scripts).

A declaration is recognised by its return type (ncclResult_t, const char* or void) followed by a name starting with
nccl or pnccl and an opening parenthesis, after comments have been removed, so prose in comments never counts.
"""

import re

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_DECLARATION = re.compile(r"\b(?:ncclResult_t|const\s+char\s*\*|void)\s*(p?nccl\w+)\s*\(")


def strip_comments(text):
    return _COMMENT.sub(" ", text)


def declared_functions(header_path):
    """Returns the set of function names (nccl* and pnccl*) declared in header_path."""
    with open(header_path, encoding="utf-8", errors="replace") as f:
        text = strip_comments(f.read())
    return set(_DECLARATION.findall(text))
