#!/usr/bin/env python3
"""A TCP relay on loopback that holds every chunk a client sends for DELAY seconds
before passing it on: a store DELAY seconds away per request, so that a task on the
small example lasts long enough to be interrupted (deploy/dev/image-check.sh).

Usage: slow-relay.py LISTEN_PORT TARGET_PORT DELAY [LIFETIME]
Both ports are on 127.0.0.1. It exits by itself after LIFETIME seconds (default 600).
"""

import asyncio
import sys


async def pipe(reader, writer, delay):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main():
    listen, target, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    lifetime = float(sys.argv[4]) if len(sys.argv) > 4 else 600.0

    async def serve(client_r, client_w):
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            pipe(client_r, server_w, delay), pipe(server_r, client_w, 0)
        )

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    print(f"slow-relay: 127.0.0.1:{listen} -> 127.0.0.1:{target}, {delay} s", flush=True)
    async with server:
        await asyncio.sleep(lifetime)


asyncio.run(main())
