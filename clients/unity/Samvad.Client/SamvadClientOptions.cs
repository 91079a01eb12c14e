using System;
using System.Threading;

namespace Samvad.Client
{
    /// <summary>How a <see cref="SamvadClient"/> connects, reconnects, keeps alive and raises events.</summary>
    public sealed class SamvadClientOptions
    {
        public SamvadClientOptions()
        {
            TokenInQuery = false;
            InitialReconnectDelay = TimeSpan.FromMilliseconds(500);
            MaxReconnectDelay = TimeSpan.FromSeconds(30);
            BackoffMultiplier = 2.0;
            Jitter = 0.5;
            MaxReconnectAttempts = 0;
            ConnectTimeout = TimeSpan.FromSeconds(10);
            KeepAliveInterval = TimeSpan.FromSeconds(20);
            SilenceTimeout = TimeSpan.FromSeconds(60);
            RateLimitedRetryDelay = TimeSpan.FromSeconds(1);
            ReceiveBufferBytes = 16 * 1024;
            MaxMessageBytes = 4 * 1024 * 1024;
        }

        /// <summary>
        /// Where events and per-frame callbacks run. Set it to the Unity main thread's context
        /// (<c>SynchronizationContext.Current</c> captured in Awake/Start) so handlers may touch
        /// GameObjects. Null raises them on the client's receive thread, in order.
        /// </summary>
        public SynchronizationContext EventContext { get; set; }

        /// <summary>Send the token as <c>?token=</c> instead of an <c>Authorization: Bearer</c> header.
        /// The header keeps tokens out of URLs and proxy logs; the query works where headers cannot be set.</summary>
        public bool TokenInQuery { get; set; }

        /// <summary>Ask for the vendor's voice: <c>?voice=1</c> on the socket URL, and the server sends
        /// <see cref="SamvadClient.ReplyAudio"/> chunks (docs/voice.md). Off: text only.</summary>
        public bool Voice { get; set; }

        /// <summary>With <see cref="Voice"/>: false sends <c>?visemes=0</c>, and the chunks come without
        /// mouth shapes (and cost the server nothing for them).</summary>
        public bool Visemes { get; set; } = true;

        /// <summary>The first reconnect waits about this long; each further failed attempt multiplies it.</summary>
        public TimeSpan InitialReconnectDelay { get; set; }

        /// <summary>The cap on the reconnect delay.</summary>
        public TimeSpan MaxReconnectDelay { get; set; }

        public double BackoffMultiplier { get; set; }

        /// <summary>0..1: the share of each delay that is randomised away, so that many headsets
        /// dropped by the same network blip do not all come back in the same millisecond.</summary>
        public double Jitter { get; set; }

        /// <summary>Give up after this many consecutive failed attempts; 0 means never give up.</summary>
        public int MaxReconnectAttempts { get; set; }

        public TimeSpan ConnectTimeout { get; set; }

        /// <summary>Send an application <c>ping</c> this often (measures RTT and keeps the server's
        /// idle close, 4408, away). Zero turns it off.</summary>
        public TimeSpan KeepAliveInterval { get; set; }

        /// <summary>Treat the connection as dead and reconnect when nothing at all (not even a pong)
        /// arrived for this long. Zero turns it off. Keep it well above KeepAliveInterval.</summary>
        public TimeSpan SilenceTimeout { get; set; }

        /// <summary>How long to wait before re-sending a frame the server refused as rate_limited.</summary>
        public TimeSpan RateLimitedRetryDelay { get; set; }

        public int ReceiveBufferBytes { get; set; }

        /// <summary>A server message larger than this closes the connection (it is not ours).</summary>
        public int MaxMessageBytes { get; set; }

        /// <summary>Diagnostics sink (connects, drops, retries, handler exceptions). Called on any thread.</summary>
        public Action<string> Log { get; set; }

        /// <summary>Seed for the jitter, for reproducible tests; null uses a time-based seed.</summary>
        public int? RandomSeed { get; set; }
    }
}
