// SamvadClient, one socket: a ClientWebSocket with its ordered outgoing queue, its cancellation
// and why (and whether) this side aborted it. Each reconnect makes a new Connection.

using System;
using System.Collections.Concurrent;
using System.Net.WebSockets;
using System.Threading;
using System.Threading.Tasks;

namespace Samvad.Client
{
    public sealed partial class SamvadClient
    {
        sealed class Outgoing
        {
            public string Json;
            public bool Close;
        }

        sealed class Connection
        {
            readonly ConcurrentQueue<Outgoing> _queue = new ConcurrentQueue<Outgoing>();
            readonly TaskCompletionSource<bool> _aborted =
                new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            readonly SemaphoreSlim _signal = new SemaphoreSlim(0);
            readonly CancellationTokenSource _cts;

            public Connection(ClientWebSocket socket, int number, CancellationToken life, double nowMs)
            {
                Socket = socket;
                Number = number;
                _cts = CancellationTokenSource.CreateLinkedTokenSource(life);
                Token = _cts.Token;
                LastHeardMs = nowMs;
            }

            public readonly ClientWebSocket Socket;
            public readonly int Number;
            public readonly CancellationToken Token;
            public Task Writer;
            public Task KeepAlive;
            public volatile bool Welcomed;
            public int? CloseCode;
            public string CloseReason;
            public Exception Error;
            public double LastHeardMs;

            public void Enqueue(string json)
            {
                _queue.Enqueue(new Outgoing { Json = json });
                _signal.Release();
            }

            public void EnqueueClose()
            {
                _queue.Enqueue(new Outgoing { Close = true });
                _signal.Release();
            }

            /// <summary>The next frame to write, in order; null once the connection is finished.</summary>
            public async Task<Outgoing> NextAsync()
            {
                while (true)
                {
                    await _signal.WaitAsync(Token).ConfigureAwait(false);
                    Outgoing item;
                    if (_queue.TryDequeue(out item)) return item;
                }
            }

            public void StopWriting()
            {
                try { _cts.Cancel(); } catch (ObjectDisposedException) { }
            }

            /// <summary>Completes when this side aborted the connection.</summary>
            public Task Aborted { get { return _aborted.Task; } }

            /// <summary>Why this side aborted the connection while it was in use (null if it did not).</summary>
            public string AbortReason { get; private set; }

            /// <param name="why">Recorded as the disconnect reason when this is the first abort; null
            /// when tearing down a connection that had already ended.</param>
            public void Abort(string why)
            {
                if (why != null && !_aborted.Task.IsCompleted && AbortReason == null) AbortReason = why;
                StopWriting();
                try { Socket.Abort(); } catch (Exception) { }
                _aborted.TrySetResult(true);
            }
        }
    }
}
