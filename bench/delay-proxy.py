#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that holds each piece DELAY seconds each way, and a new connection's
first bytes one round trip more (as TCP's handshake would): a server about 2 × DELAY away, for
measures where a connection's cost shows (asyncio's timers add their own fraction of a ms).

    python3 bench/delay-proxy.py LISTEN_PORT TARGET_PORT DELAY_SECONDS
"""
import asyncio
import sys


async def pipe(reader, writer, delay):
    try:
        while data := await reader.read(65536):
            await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    writer.close()


async def main():
    listen, target, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

    async def handle(reader, writer):
        await asyncio.sleep(2 * delay)
        far_reader, far_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(reader, far_writer, delay), pipe(far_reader, writer, delay))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
