"""Types a file path into the native dialog titled argv[1] and presses Enter, as a person
would: waits (bounded) until the dialog is on screen, moves the pointer over it (Xvfb's
focus follows the pointer) and sends key events through the XTEST extension."""
import ctypes
import re
import subprocess
import sys
import time

title, path = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 30
geometry = None
while time.monotonic() < deadline:
    info = subprocess.run(
        ["xwininfo", "-name", title], capture_output=True, text=True
    ).stdout
    if "IsViewable" in info:
        number = lambda label: int(re.search(label + r":\s+(-?\d+)", info).group(1))
        geometry = (
            number("Absolute upper-left X"),
            number("Absolute upper-left Y"),
            number("Width"),
            number("Height"),
        )
        break
    time.sleep(0.1)
if geometry is None:
    sys.exit(f"no window titled {title!r} showed within 30 s")

x11 = ctypes.CDLL("libX11.so.6")
xtst = ctypes.CDLL("libXtst.so.6")
x11.XOpenDisplay.restype = ctypes.c_void_p
x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
x11.XStringToKeysym.restype = ctypes.c_ulong
x11.XStringToKeysym.argtypes = [ctypes.c_char_p]
x11.XKeysymToKeycode.restype = ctypes.c_ubyte
x11.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
x11.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
xtst.XTestFakeMotionEvent.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_ulong]
xtst.XTestFakeKeyEvent.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ulong]
display = x11.XOpenDisplay(None)
if not display:
    sys.exit("cannot open the display")
x, y, width, height = geometry
xtst.XTestFakeMotionEvent(display, -1, x + width // 2, y + height // 2, 0)
x11.XSync(display, 0)

NAMES = {"/": "slash", ".": "period", "-": "minus", "_": "underscore"}


def code(name):
    return x11.XKeysymToKeycode(display, x11.XStringToKeysym(name.encode()))


def press(name, down=True, up=True):
    if down:
        xtst.XTestFakeKeyEvent(display, code(name), 1, 0)
    if up:
        xtst.XTestFakeKeyEvent(display, code(name), 0, 0)
    x11.XSync(display, 0)


# Select the suggested name, type the whole path over it, save.
press("Control_L", up=False)
press("a")
press("Control_L", down=False)
for char in path:
    if not (char.islower() or char.isdigit() or char in "/.-"):
        sys.exit(f"cannot type {char!r}: keep the path to lower case, digits and /.-")
    press(NAMES.get(char, char))
press("Return")
