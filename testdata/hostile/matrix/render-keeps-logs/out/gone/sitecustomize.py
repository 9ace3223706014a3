old gone/sitecustomize.py
