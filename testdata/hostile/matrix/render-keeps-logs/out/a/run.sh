old a/run.sh
