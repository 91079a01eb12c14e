// The session socket of docs/protocol.md §2–§6 as a C# object.
//
// One supervisor task owns the connection life cycle: connect, run the receive loop, and on a drop
// wait (exponential backoff with jitter) and connect again, unless the close code forbids it. Each
// connection has its own single-writer send loop, because ClientWebSocket allows one outstanding
// send at a time, and its own keepalive loop. All shared state sits behind one lock; events and
// per-frame callbacks are raised outside it, on the configured SynchronizationContext or inline.

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net.WebSockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Samvad.Client
{
    public sealed class SamvadClient : IDisposable
    {
        /// <summary>The subprotocol this client offers: JSON in text frames (msgpack is not used).</summary>
        public const string Subprotocol = "samvad.v1.json";

        static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);

        readonly object _gate = new object();
        readonly SamvadClientOptions _options;
        readonly Uri _socketUri;
        readonly string _token;
        readonly SeqTracker _seq = new SeqTracker();
        readonly List<PendingFrame> _unacked = new List<PendingFrame>();
        readonly Dictionary<string, PendingFrame> _awaitingReply = new Dictionary<string, PendingFrame>();
        readonly Dictionary<string, TaskCompletionSource<PongEvent>> _pings =
            new Dictionary<string, TaskCompletionSource<PongEvent>>();
        readonly ClientStats _stats = new ClientStats();
        readonly Stopwatch _clock = Stopwatch.StartNew();
        readonly CancellationTokenSource _lifetime = new CancellationTokenSource();
        readonly TaskCompletionSource<WelcomeEvent> _firstWelcome =
            new TaskCompletionSource<WelcomeEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
        readonly Random _random;

        Task _supervisor;
        Connection _current;
        bool _live; // `welcome` arrived on _current and the unacknowledged frames were queued behind it
        string _resumeId;
        SessionState _state;
        string _role;
        bool _closing;
        Exception _stoppedBecause;
        int _connectionNumber;
        long _pingNumber;
        volatile bool _discardIncoming;

        /// <param name="serverUrl">The server root: http(s)://host:port (or ws(s)://host:port).</param>
        /// <param name="sessionId">From POST /api/sessions.</param>
        /// <param name="token">The player token (read-write) or a spectator token (read-only).</param>
        public SamvadClient(string serverUrl, string sessionId, string token, SamvadClientOptions options = null)
        {
            if (string.IsNullOrEmpty(serverUrl)) throw new ArgumentException("serverUrl is required", "serverUrl");
            if (string.IsNullOrEmpty(sessionId)) throw new ArgumentException("sessionId is required", "sessionId");
            if (string.IsNullOrEmpty(token)) throw new ArgumentException("token is required", "token");
            _options = options ?? new SamvadClientOptions();
            _token = token;
            SessionId = sessionId;
            var root = new Uri(serverUrl.TrimEnd('/') + "/");
            var builder = new UriBuilder(new Uri(root, "ws/sessions/" + Uri.EscapeDataString(sessionId)));
            builder.Scheme = root.Scheme == "https" || root.Scheme == "wss" ? "wss" : "ws";
            if (_options.TokenInQuery)
            {
                builder.Query = "token=" + Uri.EscapeDataString(token);
            }
            _socketUri = builder.Uri;
            _random = _options.RandomSeed.HasValue ? new Random(_options.RandomSeed.Value) : new Random();
        }

        // ------------------------------------------------------------------ events

        /// <summary>A socket is open and `welcome` arrived. <see cref="WelcomeEvent.IsReconnect"/> tells a
        /// reconnect from the first connection.</summary>
        public event Action<WelcomeEvent> Connected;
        public event Action<DisconnectInfo> Disconnected;
        public event Action<ReconnectInfo> Reconnecting;
        public event Action<ReplyEvent> Reply;
        public event Action<ReplyDeltaEvent> ReplyDelta;
        public event Action<ReplyWithdrawnEvent> ReplyWithdrawn;
        public event Action<MoodEvent> Mood;
        public event Action<StageEvent> Stage;
        public event Action<SessionEndedEvent> SessionEnded;
        public event Action<SnapshotEvent> Snapshot;
        public event Action<ErrorEvent> Error;
        public event Action<AckEvent> Ack;
        public event Action<PongEvent> Pong;

        // ------------------------------------------------------------------ state

        public string SessionId { get; private set; }

        /// <summary>"player" or "spectator", once welcomed.</summary>
        public string Role { get { lock (_gate) return _role; } }

        /// <summary>The seq of the last session event applied.</summary>
        public long LastSeq { get { lock (_gate) return _seq.LastSeq; } }

        /// <summary>The client's view of the session: welcome's state with every applied event folded in.
        /// A copy; null before the first welcome.</summary>
        public SessionState State { get { lock (_gate) return _state == null ? null : _state.Copy(); } }

        public bool IsConnected { get { lock (_gate) return _live; } }

        /// <summary>Frames sent (or waiting to be) and not yet acknowledged.</summary>
        public int PendingCount { get { lock (_gate) return _unacked.Count; } }

        public ClientStats Stats { get { lock (_gate) return _stats.Copy(); } }

        /// <summary>Set when the client stopped for good (and why).</summary>
        public Exception StoppedBecause { get { lock (_gate) return _stoppedBecause; } }

        /// <summary>Debug only: while true, every incoming frame is thrown away unread, as if the network
        /// lost it. Lets a test make the server's ack and reply go missing before a <see cref="ForceDrop"/>.
        /// Cleared by itself when the connection ends, so the next connection hears everything.</summary>
        public bool DebugDiscardIncoming
        {
            get { return _discardIncoming; }
            set { _discardIncoming = value; }
        }

        // ------------------------------------------------------------------ life cycle

        /// <summary>Starts connecting (and reconnecting whenever allowed). Completes with the first
        /// `welcome`; faults if the server refuses the session for good (4401, 4403, 4404, ...).</summary>
        public Task<WelcomeEvent> ConnectAsync(CancellationToken cancel = default(CancellationToken))
        {
            lock (_gate)
            {
                if (_closing) throw new ObjectDisposedException("SamvadClient");
                if (_supervisor == null)
                {
                    var life = _lifetime.Token;
                    _supervisor = Task.Run(() => SuperviseAsync(life));
                }
            }
            if (!cancel.CanBeCanceled)
            {
                return _firstWelcome.Task;
            }
            var waiter = new TaskCompletionSource<WelcomeEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            var registration = cancel.Register(() => waiter.TrySetCanceled());
            _firstWelcome.Task.ContinueWith(t =>
            {
                registration.Dispose();
                if (t.IsFaulted) waiter.TrySetException(t.Exception.InnerExceptions);
                else if (t.IsCanceled) waiter.TrySetCanceled();
                else waiter.TrySetResult(t.Result);
            }, TaskContinuationOptions.ExecuteSynchronously);
            return waiter.Task;
        }

        /// <summary>Closes the socket politely (close code 1000) and stops reconnecting. Frames still
        /// unacknowledged fault with <see cref="SamvadClosedException"/>.</summary>
        public async Task CloseAsync(TimeSpan? timeout = null)
        {
            Connection conn;
            Task supervisor;
            lock (_gate)
            {
                _closing = true;
                conn = _live ? _current : null;
                supervisor = _supervisor;
            }
            var limit = timeout ?? TimeSpan.FromSeconds(2);
            if (conn != null && supervisor != null)
            {
                conn.EnqueueClose();
                // The server answers our close frame with its own; the receive loop then ends.
                await Task.WhenAny(supervisor, Task.Delay(limit)).ConfigureAwait(false);
            }
            Shutdown();
            if (supervisor != null)
            {
                await Task.WhenAny(supervisor, Task.Delay(limit)).ConfigureAwait(false);
            }
            Stop(new SamvadClosedException("the client was closed"));
        }

        /// <summary>Stops at once: aborts the socket without a close handshake. Safe on Unity's main
        /// thread (never blocks).</summary>
        public void Dispose()
        {
            lock (_gate)
            {
                _closing = true;
            }
            Shutdown();
            Stop(new SamvadClosedException("the client was disposed"));
        }

        void Shutdown()
        {
            Connection conn;
            lock (_gate)
            {
                conn = _current;
            }
            try { _lifetime.Cancel(); } catch (ObjectDisposedException) { }
            if (conn != null) conn.Abort("the client is closing");
        }

        /// <summary>Debug and tests: break the current socket as a network failure would. The client
        /// reconnects, resumes and re-sends what is unacknowledged, exactly as after a real drop.</summary>
        public void ForceDrop()
        {
            Connection conn;
            lock (_gate)
            {
                conn = _current;
            }
            if (conn != null)
            {
                LogLine("force-dropping connection #" + conn.Number);
                conn.Abort("dropped on purpose (ForceDrop)");
            }
        }

        // ------------------------------------------------------------------ sending

        /// <summary>Tell the server what the learner holds (null when they let go). Never makes the vendor speak.</summary>
        public PendingFrame SendScene(string objectGrabbed, string objectInView = null, string inputLanguage = null,
                                      string targetLanguage = null, string id = null, Action<AckResult> onAck = null)
        {
            id = CheckId(id, "scene");
            var frame = new JObject();
            frame["type"] = "scene";
            frame["id"] = id;
            frame["object_grabbed"] = objectGrabbed; // null is meaningful: nothing in hand
            if (objectInView != null) frame["object_in_view"] = objectInView;
            if (inputLanguage != null) frame["input_language"] = inputLanguage;
            if (targetLanguage != null) frame["target_language"] = targetLanguage;
            return Track(new PendingFrame(id, "scene", frame.ToString(Formatting.None), onAck));
        }

        /// <summary>One final learner utterance: one turn. Kept and re-sent until acknowledged;
        /// <see cref="PendingFrame.Reply"/> completes with the vendor's answer.</summary>
        public PendingFrame SendTranscript(string text, double? confidence = null, string language = null,
                                           string id = null, Action<AckResult> onAck = null)
        {
            if (text == null) throw new ArgumentNullException("text");
            if (confidence.HasValue && (confidence.Value < 0.0 || confidence.Value > 1.0))
                throw new ArgumentOutOfRangeException("confidence", "confidence is between 0 and 1");
            id = CheckId(id, "t");
            var frame = new JObject();
            frame["type"] = "transcript";
            frame["id"] = id;
            frame["text"] = text;
            frame["final"] = true;
            if (confidence.HasValue) frame["confidence"] = confidence.Value;
            if (language != null) frame["language"] = language;
            return Track(new PendingFrame(id, "transcript", frame.ToString(Formatting.None), onAck));
        }

        /// <summary>A partial (non-final) transcript, for live captions on spectators' screens. The server
        /// neither applies nor acknowledges these, so they are sent once, only while connected.</summary>
        public bool SendPartialTranscript(string text, double? confidence = null, string language = null)
        {
            if (text == null) throw new ArgumentNullException("text");
            var frame = new JObject();
            frame["type"] = "transcript";
            frame["id"] = NewId("p");
            frame["text"] = text;
            frame["final"] = false;
            if (confidence.HasValue) frame["confidence"] = Math.Max(0.0, Math.Min(1.0, confidence.Value));
            if (language != null) frame["language"] = language;
            lock (_gate)
            {
                if (!_live || _current == null) return false;
                _current.Enqueue(frame.ToString(Formatting.None));
                _stats.FramesSent++;
                return true;
            }
        }

        /// <summary>An application ping; completes with the pong (its RttMs set).</summary>
        public Task<PongEvent> PingAsync()
        {
            var done = new TaskCompletionSource<PongEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            lock (_gate)
            {
                if (!_live || _current == null)
                {
                    done.TrySetException(new InvalidOperationException("not connected"));
                    return done.Task;
                }
                string id = SendPingLocked(_current);
                _pings[id] = done;
            }
            return done.Task;
        }

        PendingFrame Track(PendingFrame frame)
        {
            lock (_gate)
            {
                if (_stoppedBecause != null)
                {
                    frame.Fail(_stoppedBecause);
                    return frame;
                }
                _unacked.Add(frame);
                if (frame.Reply != null) _awaitingReply[frame.Id] = frame;
                if (_live && _current != null)
                {
                    // Queued behind anything re-sent on this connection: the original order holds.
                    _current.Enqueue(frame.Json);
                    frame.Attempts++;
                    _stats.FramesSent++;
                }
            }
            return frame;
        }

        static string CheckId(string id, string prefix)
        {
            if (id == null) return NewId(prefix);
            if (id.Length < 1 || id.Length > 64) throw new ArgumentException("an id is 1 to 64 characters", "id");
            foreach (char c in id)
            {
                if (c < '!' || c > '~') throw new ArgumentException("an id is printable ASCII without spaces", "id");
            }
            return id;
        }

        /// <summary>A fresh frame id: prefix, a dash and 32 hex digits (at most 64 characters).</summary>
        public static string NewId(string prefix)
        {
            string guid = Guid.NewGuid().ToString("N");
            if (string.IsNullOrEmpty(prefix)) return guid;
            if (prefix.Length > 31) prefix = prefix.Substring(0, 31);
            return prefix + "-" + guid;
        }

        string SendPingLocked(Connection conn)
        {
            string id = "ping-" + (++_pingNumber);
            var frame = new JObject();
            frame["type"] = "ping";
            frame["id"] = id;
            frame["t"] = Math.Round(_clock.Elapsed.TotalMilliseconds, 3);
            conn.Enqueue(frame.ToString(Formatting.None));
            return id;
        }

        void SendResumeLocked(Connection conn)
        {
            _resumeId = NewId("resume");
            _seq.ResumeOutstanding = true;
            var frame = new JObject();
            frame["type"] = "resume";
            frame["id"] = _resumeId; // the server acks it after the replay: then the resume is over
            frame["last_seq"] = _seq.LastSeq;
            conn.Enqueue(frame.ToString(Formatting.None));
            _stats.ResumesSent++;
        }

        // ------------------------------------------------------------------ the connection loop

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

        // ------------------------------------------------------------------ receiving

        void Handle(Connection conn, string text)
        {
            JObject frame;
            try
            {
                using (var reader = new JsonTextReader(new StringReader(text)))
                {
                    reader.DateParseHandling = DateParseHandling.None;
                    frame = JObject.Load(reader);
                }
            }
            catch (JsonException ex)
            {
                LogLine("unreadable server frame: " + ex.Message);
                return;
            }
            string type = (string)frame["type"];
            var after = new List<Action>();
            try
            {
                switch (type)
                {
                    case "welcome": OnWelcome(conn, frame.ToObject<WelcomeEvent>(), after); break;
                    case "ack": OnAck(conn, frame.ToObject<AckEvent>(), after); break;
                    case "pong": OnPong(frame.ToObject<PongEvent>(), after); break;
                    case "error": OnError(conn, frame.ToObject<ErrorEvent>(), after); break;
                    case "reply.delta":
                        var delta = frame.ToObject<ReplyDeltaEvent>();
                        after.Add(() => { var h = ReplyDelta; if (h != null) h(delta); });
                        break;
                    case "reply.withdrawn":
                        var withdrawn = frame.ToObject<ReplyWithdrawnEvent>();
                        after.Add(() => { var h = ReplyWithdrawn; if (h != null) h(withdrawn); });
                        break;
                    case "reply": OnSequenced(conn, frame.ToObject<ReplyEvent>(), after); break;
                    case "mood": OnSequenced(conn, frame.ToObject<MoodEvent>(), after); break;
                    case "stage": OnSequenced(conn, frame.ToObject<StageEvent>(), after); break;
                    case "session.ended": OnSequenced(conn, frame.ToObject<SessionEndedEvent>(), after); break;
                    case "snapshot": OnSequenced(conn, frame.ToObject<SnapshotEvent>(), after); break;
                    default:
                        LogLine("ignoring server frame of unknown type " + type);
                        break;
                }
            }
            catch (JsonException ex)
            {
                LogLine("ill-typed " + type + " frame: " + ex.Message);
            }
            foreach (var action in after)
            {
                Raise(action);
            }
        }

        void OnWelcome(Connection conn, WelcomeEvent welcome, List<Action> after)
        {
            lock (_gate)
            {
                if (_current != conn) return;
                conn.Welcomed = true;
                bool first = _seq.Start(welcome.Seq);
                welcome.IsReconnect = !first;
                _role = welcome.Role;
                if (first)
                {
                    _state = welcome.State;
                }
                else
                {
                    // The events we missed come through `resume`, in order, so none is skipped
                    // or applied twice; the welcome's own state is not folded in.
                    _stats.Reconnects++;
                    SendResumeLocked(conn);
                }
                foreach (var frame in _unacked)
                {
                    conn.Enqueue(frame.Json); // same id, original order: the server dedupes
                    frame.Attempts++;
                    _stats.FramesSent++;
                    if (frame.Attempts > 1) _stats.FramesResent++;
                }
                _live = true;
            }
            after.Add(() => { var h = Connected; if (h != null) h(welcome); });
            after.Add(() => _firstWelcome.TrySetResult(welcome));
        }

        void OnAck(Connection conn, AckEvent ack, List<Action> after)
        {
            PendingFrame done = null;
            AckResult result = null;
            lock (_gate)
            {
                if (ack.Id != null && ack.Id == _resumeId)
                {
                    // Acks are queued behind the replay on the same socket: the replay is complete.
                    _resumeId = null;
                    _seq.ResumeOutstanding = false;
                }
                else
                {
                    int index = _unacked.FindIndex(f => f.Id == ack.Id);
                    if (index >= 0)
                    {
                        done = _unacked[index];
                        _unacked.RemoveAt(index);
                        _stats.Acks++;
                        if (ack.Duplicate) _stats.DuplicateAcks++;
                        result = new AckResult { Id = ack.Id, Duplicate = ack.Duplicate, Attempts = done.Attempts };
                    }
                }
            }
            after.Add(() => { var h = Ack; if (h != null) h(ack); });
            if (done != null)
            {
                var callback = done.OnAck;
                if (callback != null) after.Add(() => callback(result));
                after.Add(() => done.TryAck(result));
            }
        }

        void OnPong(PongEvent pong, List<Action> after)
        {
            TaskCompletionSource<PongEvent> waiter = null;
            lock (_gate)
            {
                if (pong.T.HasValue && pong.Id != null && pong.Id.StartsWith("ping-", StringComparison.Ordinal))
                {
                    pong.RttMs = Math.Round(_clock.Elapsed.TotalMilliseconds - pong.T.Value, 3);
                    _stats.LastRttMs = pong.RttMs;
                }
                _stats.Pongs++;
                if (pong.Id != null && _pings.TryGetValue(pong.Id, out waiter)) _pings.Remove(pong.Id);
            }
            after.Add(() => { var h = Pong; if (h != null) h(pong); });
            if (waiter != null) after.Add(() => waiter.TrySetResult(pong));
        }

        void OnError(Connection conn, ErrorEvent error, List<Action> after)
        {
            PendingFrame rejected = null;
            lock (_gate)
            {
                if (error.Code == ErrorCodes.RateLimited || error.Code == ErrorCodes.Unavailable)
                {
                    // Not applied; "send it again later with the same id". With an id, retry that
                    // frame (or the resume); without one (the per-connection rate limit does not
                    // say which frame it refused), retry everything unacknowledged: the server
                    // drops the ids it already has.
                    RetryLater(conn, error.Id);
                }
                else if (error.Id != null)
                {
                    int index = _unacked.FindIndex(f => f.Id == error.Id);
                    if (index >= 0)
                    {
                        rejected = _unacked[index];
                        _unacked.RemoveAt(index);
                        _awaitingReply.Remove(rejected.Id);
                    }
                }
            }
            after.Add(() => { var h = Error; if (h != null) h(error); });
            if (rejected != null)
            {
                var failure = new SamvadFrameRejectedException(error);
                after.Add(() => rejected.Fail(failure));
            }
        }

        void RetryLater(Connection conn, string id)
        {
            Task.Delay(_options.RateLimitedRetryDelay).ContinueWith(_ =>
            {
                lock (_gate)
                {
                    if (_current != conn || !_live) return; // a reconnect re-sends everything anyway
                    if (id != null && id == _resumeId)
                    {
                        SendResumeLocked(conn);
                        return;
                    }
                    foreach (var frame in _unacked)
                    {
                        if (id != null && frame.Id != id) continue;
                        conn.Enqueue(frame.Json);
                        frame.Attempts++;
                        _stats.FramesSent++;
                        _stats.FramesResent++;
                    }
                }
            }, TaskScheduler.Default);
        }

        void OnSequenced(Connection conn, SequencedEvent ev, List<Action> after)
        {
            PendingFrame answered = null;
            lock (_gate)
            {
                if (_current != conn || !_seq.Started) return;
                SeqDecision decision = _seq.Offer(ev.Type, ev.Seq);
                switch (decision)
                {
                    case SeqDecision.DropStale:
                        _stats.StaleEventsDropped++;
                        return;
                    case SeqDecision.DropGap:
                        _stats.GapEventsDropped++;
                        return;
                    case SeqDecision.DropGapAndResume:
                        _stats.GapEventsDropped++;
                        LogLine(string.Format("gap: got seq {0} after {1}; resuming", ev.Seq, _seq.LastSeq));
                        SendResumeLocked(conn);
                        return;
                }
                _stats.EventsApplied++;
                Fold(ev);
                var reply = ev as ReplyEvent;
                if (reply != null && reply.InReplyTo != null && _awaitingReply.TryGetValue(reply.InReplyTo, out answered))
                {
                    _awaitingReply.Remove(reply.InReplyTo);
                }
            }
            switch (ev.Type)
            {
                case "reply":
                    var reply = (ReplyEvent)ev;
                    after.Add(() => { var h = Reply; if (h != null) h(reply); });
                    if (answered != null) after.Add(() => answered.TryReply(reply));
                    break;
                case "mood":
                    var mood = (MoodEvent)ev;
                    after.Add(() => { var h = Mood; if (h != null) h(mood); });
                    break;
                case "stage":
                    var stage = (StageEvent)ev;
                    after.Add(() => { var h = Stage; if (h != null) h(stage); });
                    break;
                case "session.ended":
                    var ended = (SessionEndedEvent)ev;
                    after.Add(() => { var h = SessionEnded; if (h != null) h(ended); });
                    break;
                case "snapshot":
                    var snapshot = (SnapshotEvent)ev;
                    after.Add(() => { var h = Snapshot; if (h != null) h(snapshot); });
                    break;
            }
        }

        /// <summary>Fold an applied event into the client's view of the session (under the lock).</summary>
        void Fold(SequencedEvent ev)
        {
            var snapshot = ev as SnapshotEvent;
            if (snapshot != null)
            {
                _stats.Snapshots++;
                if (snapshot.State != null) _state = snapshot.State;
                if (_state != null) _state.Seq = snapshot.Seq;
                return;
            }
            if (_state == null) return;
            _state = _state.Copy(); // copies handed out earlier stay as they were
            _state.Seq = ev.Seq;
            var reply = ev as ReplyEvent;
            if (reply != null)
            {
                _state.Turn = reply.Turn;
                _state.HappinessScore = reply.HappinessScore;
                _state.Stage = reply.NegotiationState;
                _state.VendorMood = reply.VendorMood;
                _state.IsTerminal = reply.IsTerminal;
                if (reply.CounterPrice.HasValue) _state.VendorQuote = reply.CounterPrice;
                if (reply.Item != null) _state.Item = reply.Item;
                if (reply.LearnerOffer.HasValue) _state.LastOffer = reply.LearnerOffer;
                return;
            }
            var mood = ev as MoodEvent;
            if (mood != null)
            {
                _state.HappinessScore = mood.HappinessScore;
                _state.VendorMood = mood.VendorMood;
                return;
            }
            var stage = ev as StageEvent;
            if (stage != null)
            {
                _state.Stage = stage.To;
                return;
            }
            var ended = ev as SessionEndedEvent;
            if (ended != null)
            {
                _state.IsTerminal = true;
                _state.Outcome = ended.Outcome;
                _state.Summary = ended.Summary;
            }
        }

        // ------------------------------------------------------------------ stopping and helpers

        void Stop(Exception because)
        {
            var failed = new List<PendingFrame>();
            List<TaskCompletionSource<PongEvent>> pings;
            lock (_gate)
            {
                if (_stoppedBecause == null) _stoppedBecause = because;
                because = _stoppedBecause;
                failed.AddRange(_unacked);
                foreach (var waiting in _awaitingReply.Values)
                {
                    if (!failed.Contains(waiting)) failed.Add(waiting);
                }
                _unacked.Clear();
                _awaitingReply.Clear();
                pings = new List<TaskCompletionSource<PongEvent>>(_pings.Values);
                _pings.Clear();
            }
            foreach (var frame in failed) frame.Fail(because);
            foreach (var ping in pings) ping.TrySetException(because);
            _firstWelcome.TrySetException(because);
        }

        void Raise(Action action)
        {
            var context = _options.EventContext;
            if (context != null)
            {
                context.Post(RunHandler, action);
            }
            else
            {
                RunHandler(action);
            }
        }

        void RunHandler(object state)
        {
            try
            {
                ((Action)state)();
            }
            catch (Exception ex)
            {
                // A throwing game handler must not break the receive loop.
                LogLine("an event handler threw: " + ex);
            }
        }

        double NowMs()
        {
            return _clock.Elapsed.TotalMilliseconds;
        }

        void LogLine(string line)
        {
            var log = _options.Log;
            if (log == null) return;
            try
            {
                log("[samvad " + SessionId + "] " + line);
            }
            catch (Exception)
            {
                // logging must never take the client down
            }
        }

        static string Describe(Exception ex)
        {
            if (ex == null) return "closed";
            var inner = ex;
            while (inner.InnerException != null && (inner is AggregateException || inner is WebSocketException))
            {
                inner = inner.InnerException;
            }
            return inner == ex ? ex.GetType().Name + ": " + ex.Message
                               : ex.GetType().Name + ": " + ex.Message + " (" + inner.Message + ")";
        }

        // ------------------------------------------------------------------ one socket

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
