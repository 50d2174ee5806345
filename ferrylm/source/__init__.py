"""What ferrylm knows about source code in five languages, below the stages that use it: where a function
starts and ends and its doc comment (`pairs` for Python's ast, `pairs_ts` for tree-sitter, `spans` over both,
`summary`), which files are tests (`test_files`), what a Go standard-library package is (`go_std`), the file
shown around a hole (`file_context`), and the function index retrieval reads (`library`). The data stage and
the eval stage both import it; it imports no stage."""
