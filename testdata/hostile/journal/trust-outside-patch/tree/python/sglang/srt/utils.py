def is_sm90_supported():
    return False
