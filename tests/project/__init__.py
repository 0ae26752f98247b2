"""The repository as a newcomer meets it: the README's quick start and walkthroughs, links
and install commands in the documents, the shipped examples and recipes, the pre-commit
hook."""
