old a/sitecustomize.py
