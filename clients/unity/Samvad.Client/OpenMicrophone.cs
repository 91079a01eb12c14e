// SamvadClient, the open microphone (docs/voice.md, "The open microphone on the socket"): a
// hands-free client streams the microphone without pressing anything and the server finds the turns.
// The stream is live only: its audio is not kept, so after a reconnect the old stream is gone (the
// server forgot it with the socket) and the game opens a new one. Each turn the server finds is named
// `<stream id>.<n>`; its partials, its speech and its reply come back through this object's events.

using System;
using System.IO;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Samvad.Client
{
    public sealed partial class SamvadClient
    {
        /// <summary>Open the microphone: write its samples continuously, the server cuts them into
        /// turns (`speech.partial` at pauses, `speech` and the reply when a turn ends). Close it when done.</summary>
        public OpenMicrophone OpenMicrophone(string id = null, string language = null)
        {
            id = CheckId(id, "mic");
            return new OpenMicrophone(this, id, StartStream(id, "open", language));
        }

        internal int ConnectionNumber { get { lock (_gate) return _connectionNumber; } }

        internal bool SendOpenMicFrame(OpenMicrophone mic, string json)
        {
            lock (_gate)
            {
                if (mic.Connection != _connectionNumber) return false;  // that socket's stream is gone
                return SendLiveLocked(json);
            }
        }
    }

    /// <summary>An open microphone: <see cref="Write(byte[],int,int)"/> samples as they come (sent in
    /// chunks of at least 100 ms, the socket's frame rate limit being 20/s), then <see cref="Close"/>.
    /// Events are raised on the client's receiving thread, as the client's own.</summary>
    public sealed class OpenMicrophone : IDisposable
    {
        const int ChunkBytes = SamvadClient.MicrophoneRate * 2 / 10;
        readonly SamvadClient _client;
        readonly MemoryStream _pending = new MemoryStream();
        readonly string _prefix;
        bool _closed;
        long _written;

        internal OpenMicrophone(SamvadClient client, string id, int connection)
        {
            _client = client;
            Id = id;
            Connection = connection;
            _prefix = id + ".";
            client.SpeechPartial += OnPartial;
            client.SpeechHeard += OnSpeech;
            client.Reply += OnReply;
        }

        /// <summary>The stream's id; its turns are `Id.1`, `Id.2`, ...</summary>
        public string Id { get; private set; }
        internal int Connection { get; private set; }

        /// <summary>What the server has heard so far of a turn in progress, at a pause in it.</summary>
        public event Action<SpeechPartialEvent> Partial;
        /// <summary>A turn ended: its words (its `Id` is the turn's id). Its reply follows.</summary>
        public event Action<SpeechEvent> TurnEnded;
        /// <summary>The vendor's answer to one of this microphone's turns (`InReplyTo` is the turn's id).</summary>
        public event Action<ReplyEvent> Reply;

        /// <summary>Seconds written so far.</summary>
        public double Seconds { get { return _written / 2.0 / SamvadClient.MicrophoneRate; } }
        /// <summary>Chunks the socket took; a chunk written while disconnected is dropped, not counted.</summary>
        public int ChunksSent { get; private set; }
        /// <summary>The connection this stream was opened on is gone: open a new microphone.</summary>
        public bool Lost { get; private set; }

        /// <summary>PCM16 little-endian mono 16 kHz bytes.</summary>
        public void Write(byte[] pcm16, int offset, int count)
        {
            if (_closed) throw new InvalidOperationException("the microphone is closed");
            _written += count;
            _pending.Write(pcm16, offset, count);
            if (_pending.Length >= ChunkBytes) Flush();
        }

        /// <summary>Unity's microphone samples (-1..1 floats), already mono 16 kHz.</summary>
        public void Write(float[] samples, int offset, int count)
        {
            var bytes = Pcm16.FromSamples(samples, offset, count);
            Write(bytes, 0, bytes.Length);
        }

        void Flush()
        {
            if (_pending.Length == 0) return;
            var frame = SamvadClient.AudioFrame(Id, "chunk");
            frame["data"] = Convert.ToBase64String(_pending.GetBuffer(), 0, (int)_pending.Length);
            _pending.SetLength(0);
            if (_client.SendOpenMicFrame(this, frame.ToString(Formatting.None))) ChunksSent++;
            else Lost = Lost || _client.ConnectionNumber != Connection;
        }

        /// <summary>Stop listening: what is buffered is sent, and a turn in progress ends (its speech
        /// and reply still come). Events stop after the last reply; call once.</summary>
        public void Close()
        {
            if (_closed) return;
            Flush();
            _closed = true;
            _client.SendOpenMicFrame(this, SamvadClient.AudioFrame(Id, "close").ToString(Formatting.None));
        }

        /// <summary>Close and stop raising events.</summary>
        public void Dispose()
        {
            Close();
            _client.SpeechPartial -= OnPartial;
            _client.SpeechHeard -= OnSpeech;
            _client.Reply -= OnReply;
        }

        bool Mine(string id) { return id != null && id.StartsWith(_prefix, StringComparison.Ordinal); }

        void OnPartial(SpeechPartialEvent e) { var h = Partial; if (Mine(e.Id) && h != null) h(e); }
        void OnSpeech(SpeechEvent e) { var h = TurnEnded; if (Mine(e.Id) && h != null) h(e); }
        void OnReply(ReplyEvent e) { var h = Reply; if (Mine(e.InReplyTo) && h != null) h(e); }
    }
}
