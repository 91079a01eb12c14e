// SamvadClient, transport: the supervisor that connects, reconnects with backoff and tears each
// connection down, and the three loops of one connection (receive, single writer, keepalive).

using System;
using System.IO;
using System.Net.WebSockets;
using System.Threading;
using System.Threading.Tasks;

namespace Samvad.Client
{
    public sealed partial class SamvadClient
    {
        async Task SuperviseAsync(CancellationToken life)
        {
            int failures = 0; // consecutive attempts that never reached `welcome`
            while (!life.IsCancellationRequested)
            {
                Connection conn = null;
                Exception failure = null;
                var socket = new ClientWebSocket();
                socket.Options.AddSubProtocol(Subprotocol);
                if (!_options.TokenInQuery)
                {
                    socket.Options.SetRequestHeader("Authorization", "Bearer " + _token);
                }
                try
                {
                    using (var timeout = CancellationTokenSource.CreateLinkedTokenSource(life))
                    {
                        timeout.CancelAfter(_options.ConnectTimeout);
                        await socket.ConnectAsync(_socketUri, timeout.Token).ConfigureAwait(false);
                    }
                    lock (_gate)
                    {
                        if (_closing)
                        {
                            socket.Abort();
                            break;
                        }
                        conn = new Connection(socket, ++_connectionNumber, life, NowMs());
                        _current = conn;
                        _stats.Connections++;
                    }
                    LogLine("connection #" + conn.Number + " open (subprotocol " + (socket.SubProtocol ?? "none") + ")");
                    conn.Writer = Task.Run(() => WriteLoopAsync(conn));
                    conn.KeepAlive = Task.Run(() => KeepAliveLoopAsync(conn));
                    var receiving = ReceiveLoopAsync(conn);
                    // Stop waiting as soon as the connection is aborted here: Mono does not always
                    // wake a pending read when its socket is closed under it.
                    await Task.WhenAny(receiving, conn.Aborted).ConfigureAwait(false);
                    if (!receiving.IsCompleted)
                    {
                        conn.Error = conn.Error ?? new WebSocketException("the connection was aborted");
                    }
                }
                catch (Exception ex)
                {
                    failure = ex;
                }
                if (conn != null)
                {
                    await TeardownAsync(conn).ConfigureAwait(false);
                }
                else
                {
                    socket.Abort();
                    socket.Dispose();
                }
                bool closing;
                lock (_gate)
                {
                    closing = _closing;
                }
                if (closing || life.IsCancellationRequested)
                {
                    break;
                }

                int? code = conn != null ? conn.CloseCode : null;
                string reason = conn != null && conn.CloseCode.HasValue ? conn.CloseReason : Describe(conn != null ? conn.Error : failure);
                if (conn != null && !conn.CloseCode.HasValue && conn.AbortReason != null)
                {
                    reason = conn.AbortReason;
                }
                if (conn != null && conn.Welcomed) failures = 0;
                failures++;
                bool retry = MayReconnect(code);
                if (retry && _options.MaxReconnectAttempts > 0 && failures > _options.MaxReconnectAttempts)
                {
                    retry = false;
                    reason = "gave up after " + _options.MaxReconnectAttempts + " attempts: " + reason;
                }
                LogLine(string.Format("connection {0} ended: code {1}, {2}", conn != null ? "#" + conn.Number : "attempt",
                                      code.HasValue ? code.Value.ToString() : "none", reason));
                if (conn != null || !retry)
                {
                    var info = new DisconnectInfo { CloseCode = code, Reason = reason, WillReconnect = retry };
                    Raise(() => { var h = Disconnected; if (h != null) h(info); });
                }
                if (!retry)
                {
                    Stop(new SamvadClosedException("the session socket closed for good: " + reason, code));
                    break;
                }
                int delay = BackoffMs(failures, code);
                var next = new ReconnectInfo { Attempt = failures, DelayMs = delay };
                Raise(() => { var h = Reconnecting; if (h != null) h(next); });
                try
                {
                    await Task.Delay(delay, life).ConfigureAwait(false);
                }
                catch (OperationCanceledException)
                {
                    break;
                }
            }
        }

        /// <summary>Close codes after which reconnecting cannot help (docs/protocol.md §6).</summary>
        public static bool MayReconnect(int? closeCode)
        {
            if (!closeCode.HasValue) return true; // the network broke
            switch (closeCode.Value)
            {
                case CloseCodes.Unauthorized:   // get a new token
                case CloseCodes.WrongSession:   // use the right token
                case CloseCodes.UnknownSession: // create a new session
                case CloseCodes.Superseded:     // another player connection took over
                case CloseCodes.MessageTooBig:  // re-sending the same frame would fail again
                case CloseCodes.ProtocolError:  // 1002: a client bug; reconnecting would repeat it
                case CloseCodes.InvalidPayload: // 1007: text that is not UTF-8, the same
                    return false;
                default:
                    return true;
            }
        }

        int BackoffMs(int attempt, int? code)
        {
            double initial = Math.Max(1.0, _options.InitialReconnectDelay.TotalMilliseconds);
            double cap = Math.Max(initial, _options.MaxReconnectDelay.TotalMilliseconds);
            double delay = initial * Math.Pow(Math.Max(1.0, _options.BackoffMultiplier), Math.Min(attempt - 1, 30));
            if (code == CloseCodes.RateAbuse)
            {
                delay = Math.Max(delay, cap / 2); // "back off before reconnecting"
            }
            delay = Math.Min(delay, cap);
            double jitter = Math.Max(0.0, Math.Min(1.0, _options.Jitter));
            delay *= 1.0 - jitter * _random.NextDouble();
            return (int)Math.Round(delay);
        }

        async Task TeardownAsync(Connection conn)
        {
            lock (_gate)
            {
                if (_current == conn)
                {
                    _current = null;
                    _live = false;
                    _resumeId = null;
                    _seq.ResumeOutstanding = false;
                }
                foreach (var ping in _pings.Values)
                {
                    ping.TrySetException(new InvalidOperationException("the connection dropped before the pong"));
                }
                _pings.Clear();
            }
            _discardIncoming = false;
            conn.StopWriting();
            try
            {
                await Task.WhenAll(conn.Writer ?? CompletedTask(), conn.KeepAlive ?? CompletedTask()).ConfigureAwait(false);
            }
            catch (Exception)
            {
                // the loops report their own failures
            }
            if (conn.Socket.State == WebSocketState.CloseReceived)
            {
                // Finish the close handshake the server started (no writer is left to race with).
                try
                {
                    using (var quick = new CancellationTokenSource(500))
                    {
                        await conn.Socket.CloseOutputAsync(WebSocketCloseStatus.NormalClosure, "", quick.Token)
                                  .ConfigureAwait(false);
                    }
                }
                catch (Exception)
                {
                    // best effort
                }
            }
            conn.Abort(null);
            conn.Socket.Dispose();
        }

        static Task CompletedTask()
        {
            return Task.FromResult(true);
        }

        async Task ReceiveLoopAsync(Connection conn)
        {
            var buffer = new byte[Math.Max(1024, _options.ReceiveBufferBytes)];
            var message = new MemoryStream();
            try
            {
                while (true)
                {
                    var result = await conn.Socket.ReceiveAsync(new ArraySegment<byte>(buffer), conn.Token)
                                                  .ConfigureAwait(false);
                    if (conn.Token.IsCancellationRequested)
                    {
                        // Aborted while this read was pending: what it brought belongs to a dead
                        // connection (the next one replays it through `resume`).
                        return;
                    }
                    if (result.MessageType == WebSocketMessageType.Close)
                    {
                        var status = result.CloseStatus ?? conn.Socket.CloseStatus;
                        conn.CloseCode = status.HasValue ? (int?)(int)status.Value : null;
                        conn.CloseReason = result.CloseStatusDescription ?? conn.Socket.CloseStatusDescription ?? "";
                        return;
                    }
                    message.Write(buffer, 0, result.Count);
                    if (message.Length > _options.MaxMessageBytes)
                    {
                        throw new InvalidDataException("a server message exceeded " + _options.MaxMessageBytes + " bytes");
                    }
                    if (!result.EndOfMessage) continue;
                    conn.LastHeardMs = NowMs();
                    if (result.MessageType == WebSocketMessageType.Text && !_discardIncoming)
                    {
                        string text = Utf8.GetString(message.GetBuffer(), 0, (int)message.Length);
                        Handle(conn, text);
                    }
                    message.SetLength(0);
                }
            }
            catch (Exception ex)
            {
                conn.Error = ex;
            }
        }

        async Task WriteLoopAsync(Connection conn)
        {
            try
            {
                while (true)
                {
                    Outgoing item = await conn.NextAsync().ConfigureAwait(false);
                    if (item == null) return;
                    if (item.Close)
                    {
                        await conn.Socket.CloseOutputAsync(WebSocketCloseStatus.NormalClosure, "client closing", conn.Token)
                                  .ConfigureAwait(false);
                        return;
                    }
                    byte[] bytes = Utf8.GetBytes(item.Json);
                    await conn.Socket.SendAsync(new ArraySegment<byte>(bytes), WebSocketMessageType.Text, true, conn.Token)
                              .ConfigureAwait(false);
                }
            }
            catch (OperationCanceledException)
            {
            }
            catch (Exception ex)
            {
                // A failed send means the socket is gone: drop it and reconnect.
                conn.Abort("a send failed: " + Describe(ex));
            }
        }

        async Task KeepAliveLoopAsync(Connection conn)
        {
            var interval = _options.KeepAliveInterval;
            if (interval <= TimeSpan.Zero) return;
            try
            {
                while (true)
                {
                    await Task.Delay(interval, conn.Token).ConfigureAwait(false);
                    double silentMs = NowMs() - conn.LastHeardMs;
                    if (_options.SilenceTimeout > TimeSpan.Zero && silentMs > _options.SilenceTimeout.TotalMilliseconds)
                    {
                        conn.Abort("nothing heard for " + (int)silentMs + " ms");
                        return;
                    }
                    lock (_gate)
                    {
                        if (_current != conn) return;
                        if (_live) SendPingLocked(conn);
                    }
                }
            }
            catch (OperationCanceledException)
            {
            }
        }
    }
}
