"""How a reply is read, in one place: a model answers in prose, fenced or not, with the body alone or the
whole function, and each measure needs one thing out of it.

- the first code block of a reply (an unclosed one counts): `prompts.extract_code`, beside the wording
  that asked for it;
- Python (python.py): what a HumanEval reply appends to its prompt; a repository task's body, indented as
  in its file, with the imports the reply wrote above its function as its first lines;
- brace languages (braces.py): a HumanEval-X reply's completion after the prompt's opening brace; a Go
  repository task's body, its imports carried to the file's import block;
- summaries (summary.py): an explain reply's one-sentence summary, lead-ins and markup taken off.
"""
