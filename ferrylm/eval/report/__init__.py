"""The report: the criteria (criteria), whether the fine-tune helped (helped, with paired tests: paired),
and the report itself as JSON, Markdown and HTML (render, details, figure)."""
