#!/usr/bin/python3
"""A stand-in journald socket: binds the datagram socket at PATH, and for
SECONDS writes every entry it receives (native journal protocol, also
through a passed memfd) as one JSON object per line to OUT, decoded into
fields. Usage: journal-capture.py PATH SECONDS OUT"""
import array
import json
import os
import socket
import struct
import sys
import time

path, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]

def decode(buf):
    fields, i = {}, 0
    while i < len(buf):
        nl = buf.index(b"\n", i)
        line = buf[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack("<Q", buf[nl + 1:nl + 9])
            v = buf[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        fields[k.decode()] = v.decode(errors="replace")
    return fields

try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
s.settimeout(0.2)
end = time.time() + seconds
with open(out, "w") as f:
    print("ready", flush=True)
    while time.time() < end:
        try:
            data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(4))
        except socket.timeout:
            continue
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fd = array.array("i", payload[:4])[0]
                data = os.pread(fd, 1 << 24, 0)
                os.close(fd)
        if data:
            f.write(json.dumps(decode(data)) + "\n")
            f.flush()
